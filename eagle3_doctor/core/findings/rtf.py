"""RTF: runtime-fault signatures: the live per-position profile matched to the fault classes simulated offline."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "RTF001",
        ERROR,
        "a runtime fault class explains the live profile decisively better than running fault-free",
        meaning=(
            "Simulated on your own target, draft and prompts, one runtime fault class (a perturbation of the draft's "
            "inputs, KV cache or proposal) predicts the server's per-position acceptance profile, and every other "
            "prediction, the fault-free ones included, fits it decisively worse."
        ),
        why="The configuration and checkpoint are right; the engine's runtime feeds or runs the draft wrongly in that way.",
        confirm="the rerun the finding names (eager, one request at a time, another KV dtype) recovers the modelled profile",
    ),
    Code(
        "RTF002",
        WARNING,
        "the live profile is the modelled one, drafted far past the depth where anything is accepted",
        meaning=(
            "The server's profile is what the draft as modelled accepts, and its last positions are reached by under "
            "1% of verify passes: those draft steps cost a forward and a verify token each for no acceptance."
        ),
        why="Not a loss of acceptance: the window costs time the accepted tokens do not repay.",
        confirm="`eagle3-doctor speedup` measures the fastest number of draft tokens",
    ),
    Code(
        "RTF003",
        INFO,
        "the live profile fits the fault-free prediction: no runtime fault class explains it better",
        meaning=(
            "The server's per-position profile fits the prediction as trained (or as modelled for the engine release) "
            "and no runtime fault class fits it decisively better."
        ),
        why="The runtime adds no loss the simulated classes can see; any gap to training is the pipeline's or the draft's.",
        confirm="the finding lists the classes the counts cannot exclude and the passes that would",
    ),
    Code(
        "RTF004",
        WARNING,
        "undetermined: two predictions fit the live profile alike",
        meaning=(
            "A runtime fault class fits the server's profile best, but another prediction fits within the decisive "
            "margin: the counts cannot tell the two apart."
        ),
        why="More verify passes at the position where the two predictions differ most would decide.",
        confirm="scrape before and after a longer workload of the same prompts and rerun with both scrapes",
    ),
    Code(
        "RTF005",
        WARNING,
        "no prediction fits the live profile: neither fault-free nor any simulated runtime fault class",
        meaning=(
            "Every prediction, fault-free or with one runtime fault class, is rejected by the server's counts; the two "
            "closest are named with the figure that separates them."
        ),
        why="The fault is none of the simulated classes alone (or the server ran other prompts or settings).",
        confirm="replay the server's own prompts with its settings; rerun eagerly and with one request at a time",
    ),
)
