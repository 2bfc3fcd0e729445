"""P-EAGLE: an EAGLE-3 draft that drafts K tokens in one forward (parallel slots of a mask token and a learned placeholder state)."""
