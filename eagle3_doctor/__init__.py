"""eagle3-doctor: find out why an EAGLE-3 draft accepts fewer tokens in serving than in training."""

__version__ = "0.1.0"
