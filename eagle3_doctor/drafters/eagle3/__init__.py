"""The eagle3 drafter kind."""
