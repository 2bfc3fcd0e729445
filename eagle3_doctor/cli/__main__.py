"""`python -m eagle3_doctor.cli`, as the CLI module ran before the package had layers."""

from . import main

main()
