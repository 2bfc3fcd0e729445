"""DFL: a DFlash draft fed other target taps than it was trained on (its own index semantics, the engines'
readings of its config, and their guesses when the config names none)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

_CONFIRM = (
    "run `eagle3-doctor inspect` with the same --engine: the trained and served taps are listed in the capture "
    "vocabulary with the config key each engine read"
)

RECORDS = (
    Code(
        "DFL001",
        ERROR,
        "the engine feeds the DFlash draft other target taps than it was trained on",
        meaning=(
            "DFlash numbers a tap by the layer it follows (id i is layer_out[i]); vLLM's EAGLE-3 ids count one higher. "
            "vLLM adds 1 to dflash_config.target_layer_ids (from 0.22.0; 0.20-0.21 took them as vLLM ids, one layer "
            "early) but reads a top-level eagle_aux_hidden_state_layer_ids first, as vLLM ids; an id list written in the "
            "other convention, or a key the engine reads before the DFlash one, moves every tap by a layer. The finding "
            "names the release whose reading it applied, and its fix the release that feeds the config as trained."
        ),
        why=(
            "The draft's fc was fitted to specific layers; adjacent layers are similar but not interchangeable, so "
            "every block position predicts worse while nothing crashes (vLLM #40727: a +1 offset raised acceptance)."
        ),
        confirm=_CONFIRM,
    ),
    Code(
        "DFL002",
        ERROR,
        "the engine feeds the DFlash draft a number of taps its fc does not take",
        meaning=(
            "The draft's fc takes n target states concatenated; the engine captures another number (vLLM falls back "
            "to the target's three EAGLE-3 default layers when the config names none, while sizing the fc for the "
            "draft's num_hidden_layers)."
        ),
        why="The concatenated features do not fit the fc: the engine refuses to load or fails on the first forward.",
        confirm=_CONFIRM,
    ),
    Code(
        "DFL003",
        WARNING,
        "the DFlash config names no target_layer_ids: the engine guesses the taps",
        meaning=(
            "Without target_layer_ids SGLang guesses evenly spaced taps from the number of draft *layers* "
            "(build_target_layer_ids), and vLLM uses the target's EAGLE-3 defaults. The guess loads cleanly whenever "
            "the count happens to fit the fc, whatever taps the draft was trained on."
        ),
        why="A guess that differs from training collapses acceptance silently (sgl #37475: a count collision loaded cleanly).",
        confirm=_CONFIRM,
    ),
    Code(
        "DFL004",
        ERROR,
        "the way the engine drafts the DFlash draft (its taps, its block) costs acceptance, measured",
        meaning=(
            "acceptance on a DFlash draft drafts every block of the target's own greedy continuation twice, once as it "
            "was trained (its taps, its block_size) and once as the engine runs it (the taps it reads from the config, "
            "the block the launch serves), and compares the tokens per verify pass (the bonus token included) with an "
            "interval over prompts; diagnose splits the difference into one lever per slot and one for the block."
        ),
        why=(
            "The measured cost of DFL001 or DFL005 on the user's own target and prompts, judged as ACC001 is: an error "
            "where setting it back decides (at least 0.1 tokens per pass, interval clear of 0), a warning where it is of "
            "that size but its interval reaches 0, a lead (info) where it is real but smaller, absent otherwise."
        ),
        confirm="rerun `eagle3-doctor acceptance` on the copy the fix describes: the served path then equals the trained one",
    ),
    Code(
        "DFL005",
        WARNING,
        "the engine drafts blocks of another size than the DFlash draft was trained on",
        meaning=(
            "A DFlash draft is trained to fill a block of block_size slots (its anchor and block_size - 1 masks) in "
            "one forward. SGLang drafts the block its launch resolves (--speculative-num-draft-tokens, or "
            "--speculative-dflash-block-size, else the draft's config) and only logs a warning where that differs from "
            "the config (read in 0.5.11's dflash_worker.py, 0.5.15's and 0.5.23's dflash_worker_v2.py); vLLM drafts num_speculative_tokens masks after the "
            "anchor (v1/spec_decode/dflash.py, read in 0.20.0 and 0.33.0). The measuring commands draft the served block, so the figures are the engine's."
        ),
        why=(
            "A smaller block caps every pass below what the draft can reach; a larger one fills slots the draft never "
            "learned, each one more token to verify, and changes what every mask row attends to."
        ),
        confirm="rerun `eagle3-doctor acceptance` with the launch line set to the trained block: the served path then equals the trained one",
    ),
)
