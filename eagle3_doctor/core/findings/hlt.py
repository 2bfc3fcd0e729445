"""HLT: absolute health, judged against a stated reference (every measuring command, every drafter kind)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "HLT001",
        ERROR,
        "the draft has no skill: it accepts at the no-skill baseline on every path measured",
        meaning=(
            "Measured on the replayed prompts, the draft's mean acceptance length (tokens per verify pass, the "
            "target's own bonus token included) stays within 0.1 of 1.0, the figure of a draft that proposes nothing "
            "the target takes, on every path the run measured: as the engine serves it and with every "
            "serving-vs-training difference set back. The interval over prompts lies below 1.1."
        ),
        why=(
            "No serving setting recovers acceptance a draft does not have: the weights themselves are at fault (saved "
            "at initialisation, exported in another head or tensor layout, trained for another target, NaN or "
            "overwritten). Where every path agrees at 1.0, a lever that recovers a few hundredths is noise around "
            "zero skill, not a cause."
        ),
        confirm=(
            "`eagle3-doctor inspect` (every tensor's forensics and finiteness), `eagle3-doctor fingerprint` (the "
            "target the weights were trained for), and the module table of `diagnose`"
        ),
    ),
    Code(
        "HLT002",
        INFO,
        "the draft has skill as served, judged against the references the run measured",
        meaning=(
            "The positive verdict, with its evidence: as the engine serves it, the draft accepts more than 0.1 tokens "
            "per verify pass above the no-skill baseline (interval over prompts), no path measured in the same run "
            "accepts practically more (the size rule of `docs/diagnose.md`), and no other finding of the run is a "
            "warning or an error. The evidence names each reference used and each one the command did not look at."
        ),
        why=(
            "Two paths that agree are not a healthy draft: the same config can mislead both. The finding says what "
            "was compared, so a reader can tell a judged draft from an unexamined one."
        ),
        confirm="the references named in the evidence; `eagle3-doctor diagnose` looks at the most",
    ),
    Code(
        "HLT003",
        WARNING,
        "undetermined: a path measured beside the served one accepts more, and nothing in the run decides it",
        meaning=(
            "Another path of the same run (the training features, the trained taps or way) accepts at least 0.1 tokens "
            "per verify pass more than the served one, yet no finding of the run decides why: the paired difference "
            "is within the noise of these prompts, or the run is too small. Neither healthy nor a cause."
        ),
        why="A difference of practical size that the prompts cannot separate from zero: more prompts decide it either way.",
        confirm="the same run on more prompts (--limit, --max-new-tokens), or `eagle3-doctor diagnose`, which pairs every lever",
    ),
    Code(
        "HLT004",
        WARNING,
        "the engine drafts positions that accept nothing: draft tokens and verify work spent for no acceptance",
        meaning=(
            "Of the K tokens the engine drafts a pass, the last ones are reached by fewer than 1% of verify passes "
            "(the upper bound of each position's interval over prompts) on the path as served: each costs a draft "
            "forward and a verify token and never pays back. Measured on chains; at least two dead positions and "
            "5 prompts."
        ),
        why="A draft trained to K steps or run past what it learned accepts nothing there; the engine's K is a serving setting.",
        confirm="the per-position rates of `eagle3-doctor acceptance`; `eagle3-doctor speedup` picks the fastest setting",
    ),
    Code(
        "HLT005",
        WARNING,
        "undetermined: the last positions drafted a pass look unreached, on too few passes to tell",
        meaning=(
            "The last two or more of the K positions are reached by under 1% of this run's verify passes, but their "
            "upper bounds reach 1%: an interval over prompts cannot bound a count of zero, so each bound is also the "
            "Wilson bound over all passes pooled (about 3.84 / passes where none reached the position). HLT004 "
            "decides once enough passes bound the rate under 1% (381 where none reached it, more where some did); until then the run says it cannot tell."
        ),
        why=(
            "A small run that reached a position in none of 60 passes has not shown that it is reached in under 1% of "
            "them; calling it dead there, and not on a larger run, made the verdict depend on the run's size."
        ),
        confirm="rerun with more prompts (--limit) or longer continuations (--max-new-tokens)",
    ),
)
