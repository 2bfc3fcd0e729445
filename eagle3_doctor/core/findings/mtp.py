"""MTP: a multi-token-prediction head fed, or recycled, another state than the one it was trained on."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "MTP001",
        ERROR,
        "the MTP head is fed final_norm where it was trained on layer_out[L-1], or the reverse",
        meaning=(
            "An MTP head's step 1 reads one target state through its hnorm. Engines hand it the target forward's "
            "output, which is post-norm (vLLM's model runner passes the model's normed output as "
            "target_hidden_states; SGLang's NextN reads spec_info.hidden_states), while a head trained on the "
            "pre-norm last layer (speculators' verifier_last_hidden_states) expects layer_out[L-1]; families "
            "differ, and a head trained on one served with the other loads and runs."
        ),
        why=(
            "hnorm removes the scale but not the final norm's per-channel weight: the head sees every channel "
            "rescaled by the target's final-norm weight, off the distribution eh_proj was fitted to, so step 1 "
            "and every recycled step after it predict worse while nothing crashes."
        ),
        confirm=(
            "run `eagle3-doctor compare-hidden` on the MTP checkpoint (the trained and served states side by side) "
            "and `acceptance`, which measures both paths; `fix` writes a copy with the final norm folded into hnorm"
        ),
    ),
    Code(
        "MTP002",
        WARNING,
        "the engine hands MTP step k > 1 another state than training recycled",
        meaning=(
            "Between chained MTP steps the head's own output is recycled: before shared_head.norm (vLLM "
            "deepseek_mtp.py returns residual + hidden_states) or after it (SGLang deepseek_nextn.py returns "
            "shared_head.norm's output; speculators recycles final_layernorm's). An engine that recycles the other "
            "one feeds steps 2..K a state the head never saw in training."
        ),
        why=(
            "Step 1 is unaffected, so the first accepted token looks healthy; every later step reads a mis-scaled "
            "state and the acceptance length stops growing with the number of speculative tokens "
            "(LightLLM recycled the raw state: acceptance length 1.80 -> 2.74 after the fix)."
        ),
        confirm="`acceptance` measures the chain with the engine's recycling beside the trained one",
    ),
    Code(
        "MTP003",
        ERROR,
        "the engine release does not load the MTP checkpoint's layout",
        meaning=(
            "The engine refuses the head's layout at start-up, in its own words: vLLM's speculators reader "
            "(transformers_utils/configs/speculators) registers no mtp algorithm in any release (0.33.0: eagle3, peagle, "
            "dflash, dflash2, dspark), so a speculators MTPDraftModel config raises ValueError; SGLang reads no speculators "
            "config and has no MTPDraftModel class. Each engine serves an MTP head only inside its target "
            "(num_nextn_predict_layers, the deepseek layout), for the target families it has an MTP model for."
        ),
        why=(
            "Nothing is drafted: the server does not start with the head, so no acceptance is measured in serving; "
            "the doctor's served figures are those of the layout the engine does load, and say so."
        ),
        confirm=(
            "the evidence quotes the engine's error and the file:line that raises it, executed on the release's own "
            "code (conformance/mtp_exec.py); `inspect --engine-version` shows other releases"
        ),
    ),
)
