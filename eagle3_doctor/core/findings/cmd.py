"""CMD: what the server launch command itself does to the draft (engines/launch.py)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "CMD001",
        ERROR,
        "--speculative-token-map (FR-Spec) replaces the draft's vocabulary, or is ignored for EAGLE3",
        meaning=(
            "The launch command passes --speculative-token-map, FR-Spec's list of frequent ('hot') token ids. SGLang "
            "loads it for EAGLE (v2) drafts as the draft's vocabulary: the draft head scores only those ids, in the "
            "file's order, and the draft config's hot_vocab_size is overridden with the list's length. For EAGLE3 drafts "
            "SGLang ignores the file with a warning: the draft's own d2t table is the vocabulary."
        ),
        why=(
            "A token outside the map is never drafted, so every position where the target continues with one is a "
            "rejection; a map built from other traffic than the one served leaves out the tokens that traffic needs. For "
            "EAGLE3 nothing changes, but the user believes a vocabulary is applied that is not."
        ),
        confirm=(
            "grep the server log for 'Ignoring the specified token map'; count how many target tokens of your prompts' "
            "greedy continuations are in the map"
        ),
    ),
    Code(
        "CMD002",
        WARNING,
        "SGLANG_ENABLE_SPEC_V2 is set with topk > 1: spec v2 drafts chains only",
        meaning=(
            "SGLANG_ENABLE_SPEC_V2 (in the command's environment) asks for SGLang's overlapped speculative worker, which "
            "drafts a chain: topk 1. With --speculative-eagle-topk above 1, the releases that read the variable turn the "
            "overlap scheduler off and run spec v1 instead (a warning at startup), and hybrid Mamba/GDN targets fail "
            "with 'Spec v2 currently only supports topk = 1'."
        ),
        why=(
            "The server runs another worker than the one the command asks for: the tree and its acceptance are spec "
            "v1's, and the overlap speedup the variable was set for is not there."
        ),
        confirm="grep the server log for 'Spec v1 is used'; measure both shapes with `eagle3-doctor speedup`",
    ),
    Code(
        "CMD003",
        ERROR,
        "the launch command uses a flag the named engine release does not have: that server refuses to start",
        meaning=(
            "The launch command passes a flag that the engine release the run names (--engine-version, or the "
            "image tag) does not register in its argument parser: one added in a later release (the newest release's "
            "argument table, which the doctor reads the command with, has it) or one an earlier release had and a "
            "later one dropped. The flag names of every tracked SGLang and vLLM release are extracted from its own "
            "wheel (conformance/flags_exec.py), and the named release's do not include it. A finding of the same run "
            "that reads that flag's value (a launch finding's data.launch_flags) is withheld beside it, and the "
            "CMD003's evidence names it: that server never runs with the flag."
        ),
        why=(
            "argparse stops that release's server at startup with 'unrecognized arguments': nothing is served, and "
            "what the doctor measures assumes a launch that never runs."
        ),
        confirm="run the launch command against that release, or `python -m sglang.launch_server --help` / `vllm serve --help` there",
    ),
    Code(
        "CMD004",
        ERROR,
        "the named SGLang release refuses this launch's speculative settings at start-up",
        meaning=(
            "The SGLang release the run names (--engine-version, or the image tag) stops at start-up on the launch's "
            "speculative settings, in its own argument handling: its parser does not take the --speculative-algorithm "
            "name (DFLASH before 0.5.11, STANDALONE before 0.5.2, EAGLE3 before 0.4.4.post2; before 0.5.12 any name not "
            "written in capitals, as argparse matches its choices exactly), it asserts that "
            "--speculative-eagle-topk and --speculative-num-draft-tokens are unset when --speculative-num-steps is, "
            "--speculative-num-steps without --speculative-eagle-topk leaves topk None and a later check compares it "
            "(a TypeError from 0.5.2), or a DFLASH --speculative-dflash-block-size differs from "
            "--speculative-num-draft-tokens. Each release's own code was executed on these launches "
            "(conformance/spec_defaults_exec.py); the finding cites the file and line that raise."
        ),
        why="The server never starts: nothing is served, and what the doctor measures assumes a launch that never runs.",
        confirm="run the launch command against that release: it exits with the error the finding quotes",
    ),
    Code(
        "CMD005",
        ERROR,
        "the SGLang launch configures a draft but names no --speculative-algorithm: it serves without speculation",
        meaning=(
            "The launch command passes SGLang speculative settings (--speculative-draft-model-path, the tree's steps, "
            "topk or draft tokens) but no --speculative-algorithm. SGLang turns a missing algorithm into "
            "SpeculativeAlgorithm.NONE (from_string(None), srt/speculative/spec_info.py) and keeps the draft's path "
            "without loading it: read in 0.4.6, 0.5.2, 0.5.10 (server_args.py) and 0.5.23 "
            "(arg_groups/speculative_hook.py), where only NEXTN is rewritten (to EAGLE) and nothing sets the algorithm "
            "from a draft path (docs/engine-sources.md). No warning is logged."
        ),
        why=(
            "The draft never runs: every token is one target forward, with no acceptance to measure or lose. What the "
            "doctor measures (with EAGLE3 assumed) is what the server would do once the algorithm is named."
        ),
        confirm=(
            "the server log has no speculative worker lines and /metrics no spec_accept_length; "
            "`eagle3-doctor server-metrics` on the running server says so"
        ),
    ),
    Code(
        "CMD006",
        ERROR,
        "the launch gives a flag a value the named release's parser does not take: that server refuses to start",
        meaning=(
            "The launch command gives a flag a value outside the names the engine release the run names (--engine-version, "
            "or the image tag) lists for it: argparse's choices, matched exactly after the flag's type, case and all. "
            "The choices are read from each tracked release's own wheel: SGLang's where they are a literal list "
            "(conformance/flags_exec.py: add_argument(choices=[...]) and Arg(choices=[...]) fields taking the value as a "
            "string), and every tracked vLLM release's: the same literal lists, and the flags its get_kwargs makes from a "
            "config field whose annotation is one Literal of strings (choices, not a metavar: no str beside it); choices "
            "held in a variable or met through a converting type are not checked. --speculative-algorithm is CMD004's, "
            "from the release's own code executed. For vLLM, the "
            "--speculative-config method: from 0.9.1 SpeculativeConfig is a pydantic dataclass whose method field is a "
            "Literal, read from each tracked release's config module with its aliases followed (MTPModelTypes, "
            "EagleModelTypes, ...); pydantic matches a Literal exactly, so EAGLE3 is refused where eagle3 is taken."
        ),
        why=(
            "argparse (pydantic, for vLLM's method) stops that release's server at startup: nothing is served, and what "
            "the doctor measures assumes a launch that never runs."
        ),
        confirm="run the launch command against that release, or `python -m sglang.launch_server --help` there",
    ),
    Code(
        "CMD007",
        ERROR,
        "the launch names a speculative method the named vLLM release does not act on: it detects another from the draft",
        meaning=(
            "Before 0.9.1 vLLM's SpeculativeConfig is a plain dataclass: nothing validates --speculative-config's method, "
            "and the release compares it with == against the names it handles (read from each release's config.py: "
            "every comparison with self.method), case and all. A name it matches none of falls through to its "
            "detection from the draft: eagle for a path holding 'eagle-' (0.8.5 on: or 'eagle3-'), a model_type it "
            "knows, else draft_model. 0.8.4 handles no eagle3 at all."
        ),
        why=(
            "The server starts and runs an EAGLE-3 draft as EAGLE-1 (no aux hidden states) or as a plain draft model: "
            "acceptance collapses with nothing in the log, and what the doctor measures assumes eagle3."
        ),
        confirm="read the method the engine logs at start-up (SpeculativeConfig's repr names it)",
    ),
    Code(
        "CMD008",
        ERROR,
        "the launch runs the draft under a speculative algorithm built for another kind of drafter",
        meaning=(
            "Each engine serves a drafter kind as trained under its own algorithm: SGLang EAGLE-3 and P-EAGLE drafts "
            "under EAGLE3, MTP heads under NEXTN (its alias of EAGLE), DFlash drafts under DFLASH; vLLM under the "
            "methods eagle3, mtp and dflash; TensorRT-LLM EAGLE-3 drafts under the decoding_type Eagle3 or Eagle, "
            "MTP heads under MTP. The algorithm is the launch's as the engine settles it: SGLang's "
            "--speculative-algorithm; vLLM's method as typed or, unset, detected per release from the draft's path "
            "('eagle-' in it means EAGLE-1 in every release, 'eagle3-' did too in 0.8.5-0.10.1.1), its model_type or "
            "architectures, else draft_model or a refusal (engines/vllm_method.py, executed from each release's "
            "SpeculativeConfig, conformance/method_exec.py). What the engine does with the kind under the other "
            "algorithm is quoted where read: an EAGLE-3 draft under SGLang's EAGLE gets no aux hidden states and the "
            "target's lm_head; an MTP head under SGLang's EAGLE3 stops the server at start; a DFlash draft under "
            "anything but its own algorithm is not drafted in blocks."
        ),
        why=(
            "The server never drafts with the draft as it was trained: it refuses to start, or it runs the draft on "
            "the wrong hidden states, head or loop and acceptance collapses with nothing in the log. Every figure the "
            "doctor measures assumes the draft's own algorithm."
        ),
        confirm="read the worker or proposer and method the server logs at start-up",
    ),
    Code(
        "CMD009",
        WARNING,
        "the launch serves another target or draft than the one measured",
        meaning=(
            "--target and --draft win over the paths the launch command names: the doctor loads and measures what "
            "the options name. Here an option and the launch name two local directories holding different "
            "checkpoints (their config.json, their weight files' names or sizes, or those files' bytes at the "
            "head, the middle and the end differ); a copy of the same "
            "checkpoint is the same model and says nothing. Where one side is not a local directory (a hub id) the "
            "two are not compared and the launch's notes say so."
        ),
        why=(
            "Every figure is about the model measured, not the one the server loads: a healthy verdict on one says "
            "nothing about the other."
        ),
        confirm="compare the two directories' config.json and weight files; rerun with the launch's own path",
    ),
)
