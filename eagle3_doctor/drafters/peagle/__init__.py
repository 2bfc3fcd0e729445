"""The peagle drafter kind."""
