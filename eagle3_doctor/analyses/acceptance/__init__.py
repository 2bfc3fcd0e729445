"""acceptance: how many draft tokens the target accepts, estimated for every base at once on replayed
prompts (the estimator, accumulated per feature path), checked against a plain sequential loop, into findings."""
