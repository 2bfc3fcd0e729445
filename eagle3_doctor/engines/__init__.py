"""What each serving engine and trainer does, by release: capture rules and the executed release
table (capture), and launch commands (launch). Imports core and io."""
