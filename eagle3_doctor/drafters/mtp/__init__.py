"""The doctor's commands on an MTP head: the checkpoint against the engine (symbolic), the two target states
side by side, acceptance of the chain on both paths, and the fix."""
