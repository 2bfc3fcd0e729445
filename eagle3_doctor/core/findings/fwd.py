"""FWD: the draft as the engine runs it against the draft as trained (issue 13; draft/served.py)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "FWD001",
        ERROR,
        "the engine runs a forward flag (norm placement) differently from training",
        meaning=(
            "The engine runs a forward flag (norm placement: norm_before_fc, fc_norm, norm_before_residual, norm_output, "
            "the norm before lm_head) differently from how the draft was trained, e.g. the flag sits in a key this engine "
            "never reads."
        ),
        why="The draft's forward differs from training at every step: its hidden states and logits move off what it learned.",
        confirm="`eagle3-doctor inspect` lists the flags the engine runs; `acceptance` runs the draft the engine's way",
    ),
    Code(
        "FWD002",
        WARNING,
        "undetermined whether this engine version applies a forward flag the draft was trained with",
        meaning="It is not pinned to a source whether this engine version applies a flag the draft was trained with.",
        why="If it does not, the forward differs from training as in FWD001.",
        confirm="check the engine's logs or code for the flag, or name a modelled version with --engine-version",
    ),
    Code(
        "FWD003",
        ERROR,
        "the engine replaces the draft's own lm_head or embed_tokens with the target's",
        meaning="The engine replaces the draft's own lm_head or embed_tokens with the target's.",
        why="The draft was trained with its own tables; the target's differ, so proposals change.",
        confirm="`eagle3-doctor inspect` compares the tables; an engine release with the fix keeps the draft's",
    ),
    Code(
        "FWD004",
        ERROR,
        "tie_word_embeddings makes the engine use embed_tokens as the draft's lm_head",
        meaning="tie_word_embeddings: true makes the engine use embed_tokens as the draft's lm_head.",
        why="The trained lm_head is ignored: the draft proposes from its embedding table.",
        confirm="look for tie_word_embeddings in the draft's config.json",
    ),
    Code(
        "FWD005",
        WARNING,
        "the draft has both norm_before_fc and fc_norm, a pair speculators rejects",
        meaning="The draft has both norm_before_fc and fc_norm, a pair speculators rejects as mutually exclusive.",
        why="Engines that accept the pair may apply them in another order than training.",
        confirm="check which of the two the training run used",
    ),
    Code(
        "FWD006",
        ERROR,
        "the engine rotates the draft's RoPE in another layout (NeoX vs GPT-J-interleaved) than training",
        meaning=(
            "The engine applies RoPE in another layout than the draft was trained with: NeoX (rotate-half) versus "
            "GPT-J-interleaved pairs, decided by rope_is_neox_style or the engine's own default for the architecture."
        ),
        why=(
            "Each q/k pair is rotated by another frequency than in training, so attention loses its positions: "
            "TensorRT-LLM PR #19036 reports an acceptance length of 1.01."
        ),
        confirm="`eagle3-doctor inspect` names the layout each side uses and where it was read",
    ),
    Code(
        "FWD007",
        WARNING,
        "undetermined whether the draft was trained with NeoX or GPT-J-interleaved RoPE",
        meaning=(
            "Nothing says which RoPE layout the draft was trained with (a Llama 4 target rotates GPT-J-interleaved pairs "
            "while SpecForge and speculators train NeoX) and the draft config names none."
        ),
        why="If training and the engine disagree, acceptance collapses as in FWD006.",
        confirm=(
            "`eagle3-doctor acceptance` runs the draft under both layouts and names the one its weights fit; or ask the "
            "training run which layout it used and write rope_is_neox_style into the draft's config.json"
        ),
    ),
    Code(
        "FWD008",
        ERROR,
        "the engine runs the draft's attention without the q_norm/k_norm (Qwen3 layer) it was trained with",
        meaning=(
            "The draft's attention was trained with Qwen3's q_norm/k_norm (speculators drafts with a Qwen3 layer when "
            "transformer_layer_config.model_type is qwen3) and the engine runs it without them: SGLang's "
            "LlamaForCausalLMEagle3 has no such norms and skips their weights silently; vLLM registers a Qwen3 EAGLE-3 "
            "draft only from 0.33."
        ),
        why="Every query and key reaches RoPE and the dot product at another scale than in training.",
        confirm=(
            "`eagle3-doctor inspect` names the layer config and weights; `acceptance` measures the draft with and "
            "without the norms (the as_served column)"
        ),
    ),
    Code(
        "FWD009",
        ERROR,
        "the engine normalises the draft's later decoder layers with another weight than training",
        meaning=(
            "A draft with more than one decoder layer: each layer after the first applies a norm before its attention. "
            "speculators trains it as the verifier's own decoder layer (layers.N.input_layernorm) and vLLM applies that "
            "weight; SGLang from 0.5.12 applies layers.N.hidden_norm instead, which a speculators checkpoint does not hold, "
            "so the engine keeps its initial weight of 1.0 and leaves the trained input_layernorm unused."
        ),
        why="The later layers' attention reads a state scaled differently from training at every step.",
        confirm=(
            "`eagle3-doctor inspect` names the norm each engine release applies (executed from its llama_eagle3.py); "
            "`acceptance` measures the draft that way (the as_served column)"
        ),
    ),
    Code(
        "FWD010",
        ERROR,
        "the engine does not serve every decoder layer of a multi-layer draft",
        meaning=(
            "The engine release does not run every decoder layer of a multi-layer draft: it refuses the config at "
            "start-up (SGLang before 0.5.12: 'EAGLE3 currently only supports 1 layer') or builds one layer and has no "
            "parameters for the rest (vLLM before 0.11.1)."
        ),
        why="The server does not start, or runs a draft cut to its first layer, which is not the function it learned.",
        confirm=(
            "`eagle3-doctor inspect` shows what the release's own draft model builds for num_hidden_layers = 2 "
            "(executed by conformance/draft_exec.py); upgrade to the release it names"
        ),
    ),
    Code(
        "FWD011",
        ERROR,
        "the engine runs the draft's sliding-window attention as full attention",
        meaning=(
            'The draft config declares sliding-window attention (layer_types with "sliding_attention" and a '
            "sliding_window) and the engine release builds the draft's attention without the window: SGLang never takes "
            "the window from the draft config (from 0.5.12 only from --speculative-draft-window-size), vLLM before 0.10.1 "
            "reads no layer_types, and vLLM 0.10.1 fails at start-up indexing layer_types with the target's layer id."
        ),
        why=(
            "Past the window the draft attends to keys it never attended to in training, so its proposals drift as the "
            "context grows: acceptance is fine on short prompts and falls once the context passes the window."
        ),
        confirm=(
            "`eagle3-doctor inspect` names the window and what the release's own draft model builds from it (executed by "
            "conformance/draft_exec.py on the release's llama.py); compare acceptance on prompts shorter and longer than "
            "the window"
        ),
    ),
    Code(
        "FWD012",
        ERROR,
        "the engine builds the draft's fc for another number of aux hidden states than it was trained with",
        meaning=(
            "The draft's fc takes the concatenation of N target hidden states (fc.weight is [hidden, N x "
            "target_hidden_size]) and the engine release builds fc for another N: SGLang before 0.5.12 and vLLM before "
            "0.22.0 always build it for 3; later releases count num_aux_hidden_states, then eagle_config's "
            "eagle_aux_hidden_state_layer_ids, and take 3 when neither is there (vLLM never counts a top-level id list, "
            "the place a speculators checkpoint keeps it)."
        ),
        why="The trained fc does not fit the one the engine builds, so the draft as trained is not what the server runs.",
        confirm=(
            "`eagle3-doctor inspect` names the count the release's own draft model builds (fc's input width, executed "
            "by conformance/draft_exec.py) and the key it took it from"
        ),
    ),
    Code(
        "FWD013",
        INFO,
        "the chain drafts more steps a pass than the draft was trained for",
        meaning=(
            "The draft checkpoint records the depth it was trained for (speculators: "
            "speculators_config.proposal_methods[0].speculative_tokens, its training-time-test depth) and the chain as "
            "served drafts more steps (num_speculative_tokens, --speculative-num-steps); vLLM serving the checkpoint on "
            "its own drafts that depth when num_speculative_tokens is left out (executed from its speculators config "
            "builder)."
        ),
        why=(
            "Past the trained depth the draft runs on its own outputs further than training ever fed it, so each extra "
            "position costs a draft forward and a verify token for whatever acceptance it still earns."
        ),
        confirm=(
            "`eagle3-doctor acceptance` prints the measured per-position rate within and past the trained depth; "
            "whether the extra steps pay is a question of speed, not acceptance (info: the verdict does not read it): "
            "`eagle3-doctor speedup` measures it"
        ),
    ),
    Code(
        "FWD014",
        ERROR,
        "the engine builds the draft's RoPE with another theta or scaling than the draft config states",
        meaning=(
            "The draft's attention is built with the rope theta and scaling its config.json states as transformers 5 "
            "reads them (rope_parameters, else rope_theta and rope_scaling: how the trainer read them), and the engine "
            "release, through the transformers it runs with, builds another: SGLang up to 0.5.9 and vLLM up to 0.11.x read "
            "only rope_theta and rope_scaling, so under transformers 4 a config written in the transformers 5 layout "
            "(rope_parameters alone) runs at theta 10000 with no scaling; vLLM 0.12.0-0.23.0 keep the scaling there and "
            "still take theta 10000; under transformers 5 (no rope_theta attribute) SGLang 0.5.6.post1 and vLLM up to "
            "0.11.x take theta 10000 whatever the config says."
        ),
        why=(
            "Every query and key is rotated by other frequencies than in training, so the draft's attention reads "
            "positions it never learned; the pair whose frequency moved most drifts out of phase first, and the error "
            "grows with the distance between a query and its keys."
        ),
        confirm=(
            "`eagle3-doctor inspect --engine ENGINE --engine-version V` names the RoPE the release's own draft code builds "
            "from the config (executed by conformance/rope_exec.py, per transformers major the release admits) beside the "
            "trained reading, and where the rotations part; a warning, not an error, where only one of the transformers "
            "majors the release admits misreads it"
        ),
    ),
    Code(
        "FWD015",
        ERROR,
        "the engine serves the draft's KV cache in fp8, coarser than the draft checkpoint's dtype",
        meaning=(
            "The launch serves the target with an fp8 KV cache (--kv-cache-dtype fp8, fp8_e4m3 or fp8_e5m2) and the "
            "release gives the draft's attention the same dtype: vLLM before 0.26.0 and SGLang before 0.5.18 always "
            "do (the draft takes the target's cache config); later releases do unless the draft-only setting says "
            'otherwise (vLLM --speculative-config \'{"kv_cache_dtype": "auto"}\', SGLang '
            "--speculative-draft-kv-cache-dtype auto), executed from each release's own code."
        ),
        why=(
            "Every key and value the draft attends to is rounded to 3 (e4m3) or 2 (e5m2) mantissa bits at scale 1, "
            "which the draft never saw in training; how much acceptance that costs depends on the draft's key and value "
            "magnitudes, so the doctor measures it on the user's pair. An error where the measured loss clears zero, a "
            "warning where it is within noise or could not be measured."
        ),
        confirm=(
            "`eagle3-doctor acceptance --serve-cmd '...'` names the KV dtype the release gives the draft (executed by "
            "conformance/kvdtype_exec.py) and the mean acceptance length with and without the rounding, paired over the "
            "prompts; `inspect --serve-cmd '...'` names the rule and the fix with the cost undetermined"
        ),
    ),
    Code(
        "FWD016",
        ERROR,
        "a tensor of the draft sits in a safetensors file the engine never loads",
        meaning=(
            "The draft directory has a model.safetensors.index.json and a *.safetensors file its weight_map does not "
            "name, holding tensors no named file holds (a mask embedding, d2t/t2d or a head saved after the shards). "
            "Every SGLang and vLLM release with an EAGLE-3 draft loads only the files the index names "
            "(filter_duplicate_safetensors_files, executed per release), so those tensors never reach the model."
        ),
        why=(
            "The engine builds the draft without them: a missing d2t maps draft ids onto the first target ids, a "
            "missing head or norm keeps its initial value, and acceptance falls with no error at start-up."
        ),
        confirm=(
            "`eagle3-doctor inspect --engine ENGINE --engine-version V` lists each dropped file's tensors from its header "
            "and the release's loader rule (executed by conformance/weightfiles_exec.py)"
        ),
    ),
)
