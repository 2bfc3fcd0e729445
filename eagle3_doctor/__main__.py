"""`python -m eagle3_doctor`: the same program as the `eagle3-doctor` command."""

from .cli import main

main()
