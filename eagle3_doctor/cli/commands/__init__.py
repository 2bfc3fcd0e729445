"""One module per command: its options (declared in cli/options.py), its checks, the library call and
its output. cli/app.py registers them under the error boundary; none imports another command."""
