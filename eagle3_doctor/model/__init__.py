"""The target model: loading (target), the one replay loop with capture hooks (replay), the
target-and-draft setup every analysis starts from (setup) and sizing work to the machine (runtime)."""
