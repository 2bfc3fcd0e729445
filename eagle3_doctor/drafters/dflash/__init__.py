"""The dflash drafter kind."""
