"""The doctor's own Llama-family decoder: transformers' arithmetic without importing its modeling stack
(:mod:`.plan` decides when it runs, :mod:`.decoder` is the forward, :mod:`.cache` its KV caches)."""
