"""PEA: a P-EAGLE draft (parallel drafting: one forward drafts K tokens through mask slots) run by the engine
otherwise than it was trained: as an EAGLE-3 chain, with another mask token, with its slots elsewhere, or not at all."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

_CONFIRM = (
    "run `eagle3-doctor acceptance` with the same --engine on the copy the fix describes: the served path then "
    "equals the trained one, or the finding is gone"
)

RECORDS = (
    Code(
        "PEA001",
        ERROR,
        "the engine drafts the P-EAGLE draft as an EAGLE-3 chain: its parallel training goes unused",
        meaning=(
            "A P-EAGLE draft learns depth d > 0 from a mask token and a learned placeholder state (mask_hidden), never "
            'from its own previous state. vLLM runs it in parallel only for speculators_model_type "peagle" (from '
            "0.22.0, method eagle3 with parallel_drafting); any other type, and SGLang in every release, draft a "
            "chain and drop mask_hidden (vLLM with a warning, SGLang silently)."
        ),
        why=(
            "Step 1 of the chain is depth 0, but steps 2..K feed the draft a state it was never trained on, so "
            "acceptance past the first token falls while nothing fails."
        ),
        confirm=_CONFIRM,
    ),
    Code(
        "PEA002",
        ERROR,
        "the engine refuses the P-EAGLE draft",
        meaning=(
            "vLLM's speculators reader needs mask_token_id (update_peagle: KeyError), its loader needs mask_hidden "
            "in the weights when parallel drafting is on (ValueError), and releases before 0.22.0 know no "
            '"peagle" type.'
        ),
        why="The server does not start; the line says which key, tensor or release it needs.",
        confirm=_CONFIRM,
    ),
    Code(
        "PEA003",
        ERROR,
        "the engine fills the parallel slots with another token than the draft was trained with",
        meaning=(
            "vLLM takes the slots' token from the draft config's mask_token_id before pard_token; the config it reads "
            "is transformer_layer_config with the P-EAGLE keys added, so a mask_token_id inside "
            "transformer_layer_config overrides the top-level one speculators trained with."
        ),
        why="Every parallel slot reads another embedding row than in training: depths 1..K-1 propose from noise.",
        confirm=_CONFIRM,
    ),
    Code(
        "PEA004",
        ERROR,
        "the way the engine runs the P-EAGLE draft costs acceptance, measured",
        meaning=(
            "acceptance on a P-EAGLE draft drafts every pass of the target's own greedy continuation as it was "
            "trained (K slots in one forward) and as the engine runs it, and compares the tokens per verify pass (the "
            "bonus token included) with an interval over prompts."
        ),
        why=(
            "The measured cost of PEA001, PEA003 or PEA006 on the user's own target and prompts, judged as ACC001 is: an "
            "error where setting it back decides (at least 0.1 tokens per pass, interval clear of 0), a warning where it "
            "is of that size but its interval reaches 0, a lead (info) where it is real but smaller, absent otherwise."
        ),
        confirm=_CONFIRM,
    ),
    Code(
        "PEA005",
        WARNING,
        "the draft accepts more with its parallel slots at the anchor's position than at the positions the engine gives them",
        meaning=(
            "vLLM places parallel slot d at the anchor's position + d, as speculators trains it. diagnose also "
            "measures every slot at the anchor's own position, the layout a trainer that ignored position_ids "
            "teaches (NeMo Automodel #2377); an interval above 0 says the draft learned that layout."
        ),
        why="No engine key moves the slots: the draft keeps losing the difference until it is retrained with positions.",
        confirm="rerun `eagle3-doctor diagnose` on the retrained draft: the two layouts then agree or favour the engine's",
    ),
    Code(
        "PEA006",
        WARNING,
        "the engine drafts another number of tokens a pass than the draft was trained for",
        meaning=(
            "A P-EAGLE draft is trained for K depths (speculators writes them as the proposal's speculative_tokens). "
            "The launch line's num_speculative_tokens (or --num-steps here) overrides them: fewer slots cap every "
            "pass below what the draft can reach, more slots add depths it never learned, each one more token to "
            "verify."
        ),
        why="Acceptance per pass is capped by the served K, or verify work is spent on untrained slots.",
        confirm=_CONFIRM,
    ),
)
