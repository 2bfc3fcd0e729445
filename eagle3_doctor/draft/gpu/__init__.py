"""The doctor's own GPU kernels, which the native decoder and the draft share (``kernels`` says which run)."""
