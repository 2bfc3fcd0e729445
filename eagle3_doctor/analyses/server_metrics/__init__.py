"""Serving evidence: what a live server measured (acceptance counters) and captured (hidden states).

Everything else in the doctor *simulates* serving: it runs the target itself and applies an
engine's capture rule. This package reads the real thing, so the doctor can say "the wiring is
right and the draft is good: the engine is losing acceptance": the counters (counters.py), the
workload's figures from them (measured.py) and the verdict against the prediction (prediction.py).
"""
