"""inspect: a draft checkpoint and its config examined without running a prompt: the forensics of its files
(tensors, geometry, config keys), the checks against the target, and what the engine does with it."""
