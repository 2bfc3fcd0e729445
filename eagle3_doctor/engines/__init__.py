"""What each serving engine and trainer does, by release. Imports core and io.

releases (version strings, the newest modelled release), families (one record per target family),
table (the executed engine table), capture (the capture rules), keys (the config key each release
reads), serving (what an engine feeds a draft), fixes (the rules inverted), recipes (training),
table_markdown (docs/engine-table.md); launch, launch_args, launch_config (server launch commands);
quant (quantized checkpoints); spec_settings (speculative settings)."""
