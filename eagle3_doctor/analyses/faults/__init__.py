"""Runtime-fault signatures: what a serving engine's runtime fault does to the per-position acceptance profile.

Where the configuration and checkpoint are right, a live profile that is still bad comes from the engine's
runtime. Each fault class (``classes.py``, one record each) perturbs the draft's inputs, its KV cache or its
proposal; ``simulate.py`` runs the user's own draft through a sequential decode loop with that perturbation
over the target's features of the user's prompts; ``attribute.py`` ranks the classes, beside "as trained" and
"as modelled for this engine release", by how well each explains the live profile, and ``batches.py`` over live
profiles at several batch sizes at once; ``run.py`` ties them to a diagnose run.
"""
