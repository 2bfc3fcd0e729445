"""The measurements, each with its result types: compare (hidden states), acceptance (with its tree
estimator, results and the draft as served), fingerprint, inspect, templates, server_metrics and
engine_dump. Built on model, draft and engines; rendered by report."""
