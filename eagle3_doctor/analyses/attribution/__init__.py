"""diagnose: where an acceptance gap lives, measured rather than looked up in a list of known causes.

Three measurements, all on the same prompts and one target forward, each with its paired interval
over prompts (:func:`core.stats.paired`):

- **Levers.** Each lever is one difference between how the draft runs in serving and how it ran in
  training (the capture points the engine feeds; the draft forward as the engine runs it). Acceptance
  is measured with that one lever set back to the training side; "all levers" is the training side
  itself. A lever whose restoration recovers acceptance is where the gap lives, and its fix is the
  one the rules would print for it.
- **Module health.** Each module of the draft (fc, attention, MLP) is mean-ablated: its output is
  replaced by its mean over the batch's positions. A trained module costs step-1 accuracy when
  ablated; one whose ablation costs nothing is inconsistent with the rest of the checkpoint (saved at
  initialisation, loaded under another key, converted in the wrong layout).
- **Context.** Step-1 accuracy by absolute position in the sequence, per prompt; a drop past a
  position that the paired interval separates from the accuracy before it names that position.

The verdict says which branch the measurements point to (pipeline, checkpoint, context, runtime) and
"undetermined", with the evidence that would decide, when they point nowhere.
"""
