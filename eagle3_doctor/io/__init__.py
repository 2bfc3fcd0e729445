"""Everything read from or written to disk or the hub: safe file I/O, config value checks, hub
resolution, prompt files and training feature dumps. Imports only core."""
