"""DFlash drafts: which target taps they were trained on and which each engine feeds them (taps.py). The
block-parallel forward is not modelled yet: inspect only."""
