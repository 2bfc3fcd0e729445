"""Every release the harness covers, and which files of each distribution decide capture.

The lists are the releases on PyPI from the last one before EAGLE-3 support (so the harness itself
shows where support starts) to the newest when the table was last regenerated. To model a new
release: append it here and run `make conformance`; the row it lands in (or a new row) is in
conformance/table.json.
"""

SGLANG = """
0.4.3.post4 0.4.4 0.4.4.post1 0.4.4.post2 0.4.4.post3 0.4.4.post4 0.4.5 0.4.5.post1 0.4.5.post2 0.4.5.post3
0.4.6 0.4.6.post1 0.4.6.post2 0.4.6.post3 0.4.6.post4 0.4.6.post5 0.4.7 0.4.7.post1 0.4.8 0.4.8.post1
0.4.9 0.4.9.post1 0.4.9.post2 0.4.9.post3 0.4.9.post4 0.4.9.post5 0.4.9.post6 0.4.10 0.4.10.post1 0.4.10.post2
0.5.1 0.5.1.post1 0.5.1.post2 0.5.1.post3 0.5.2 0.5.3 0.5.3.post1 0.5.3.post2 0.5.3.post3
0.5.4 0.5.4.post1 0.5.4.post2 0.5.4.post3 0.5.5 0.5.5.post1 0.5.5.post2 0.5.5.post3
0.5.6 0.5.6.post1 0.5.6.post2 0.5.7 0.5.8 0.5.8.post1 0.5.9 0.5.10 0.5.10.post1 0.5.11 0.5.12 0.5.12.post1
0.5.13 0.5.13.post1 0.5.14 0.5.15 0.5.15.post1 0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23
""".split()

VLLM = """
0.8.4 0.8.5 0.8.5.post1 0.9.0 0.9.0.1 0.9.1 0.9.2 0.10.0 0.10.1 0.10.1.1 0.10.2 0.11.0 0.11.1 0.11.2
0.12.0 0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 0.19.1
0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1
0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0
""".split()


# ModelOpt: the releases since the HF EAGLE plugin captures aux hidden states with forward hooks (0.35.0),
# and the one before it (its HF plugin has no hook capture: the harness records it as absent)
MODELOPT = """
0.33.1 0.35.0 0.35.1 0.37.0 0.39.0 0.40.0 0.41.0 0.42.0 0.43.0 0.44.0
0.45.0 0.46.0 0.46.1 0.47.0
""".split()

RELEASES: dict[str, list[str]] = {"sglang": SGLANG, "vllm": VLLM, "nvidia-modelopt": MODELOPT}

# Regexes over wheel member names: only these are kept in the cache.
CAPTURE_FILE_PATTERNS: dict[str, list[str]] = {
    "sglang": [
        r"^sglang/srt/models/[^/]+\.py$",
        r"^sglang/srt/model_executor/.*\.py$",
        r"^sglang/srt/speculative/.*\.py$",
        r"^sglang/srt/layers/.*(aux|boundary).*\.py$",
        r"^sglang/srt/server_args\.py$",
        r"^sglang/srt/layers/logits_processor\.py$",  # MTP: the hidden state it hands on for recycling
        r"^sglang/srt/(configs/.*|hf_transformers_utils|utils/hf_transformers_utils)\.py$",  # MTP: config readers
        r"^sglang/version\.py$",
        r"^sglang/srt/layers/rotary_embedding(/[^/]+)?\.py$",  # the draft's RoPE: get_rope's dispatch (rope_exec)
        r"^sglang/srt/mem_cache/kv_cache_dtype\.py$",  # the KV dtype a runner, the draft's included, resolves (kvdtype_exec)
        r"^sglang/srt/arg_groups/.*\.py$",  # the server flags once they left server_args.py (kvdtype_exec)
        r"^sglang/srt/model_loader/(loader|weight_utils)\.py$",  # the weight files a checkpoint directory loads
        r"^sglang-[^/]+\.dist-info/METADATA$",  # the transformers range the release requires: how it hands a config over
    ],
    "nvidia-modelopt": [r"^modelopt/torch/speculative/.*\.py$"],
    "vllm": [
        r"^vllm/model_executor/models/[^/]+\.py$",  # every model file: families are followed through their imports
        r"^vllm/models/.*\.py$",  # from 0.27 some architectures are registered from vllm.models.<name> (kimi_linear)
        r"^vllm/config(/speculative|/__init__|/cache)?\.py$",  # /cache: the KV dtypes a cache_dtype may name (kvdtype_exec)
        r"^vllm/(attention/layer|model_executor/layers/attention/attention)\.py$",  # how a layer reads cache_dtype (kvdtype_exec)
        r"^vllm/model_executor/model_loader/(loader|default_loader|weight_utils)\.py$",  # the weight files a checkpoint directory loads
        r"^vllm/transformers_utils/configs/speculators/.*\.py$",  # update_eagle3: a speculators config's flags
        r"^vllm/v1/worker/gpu_model_runner\.py$",
        r"^vllm/v1/worker/gpu/.*\.py$",
        r"^vllm/v1/spec_decode/(eagle|llm_base_proposer)\.py$",  # MTP: how the proposer splits the head's output; P-EAGLE's mask token (peagle_exec)
        r"^vllm/transformers_utils/config\.py$",  # MTP: where a speculators config is read
        r"^vllm/envs\.py$",
        r"^vllm/model_executor/layers/rotary_embedding(/[^/]+)?\.py$",  # the draft's RoPE (rope_exec)
        r"^vllm/config/utils\.py$",  # getattr_iter, which the RoPE patch of get_config calls
        r"^vllm-[^/]+\.dist-info/METADATA$",  # the transformers range the release requires
    ],
}

# Regexes over wheel member names: the files that define each release's server flags (flags_exec.py), kept
# under .cache/flags/ apart from the capture files. SGLang: ServerArgs.add_cli_args, and from 0.5.2x the
# arg_groups whose fields become flags. vLLM: EngineArgs.add_cli_args, the OpenAI frontend's parser
# (openai/cli_args.py, later common/cli_args.py) and the `vllm serve` subcommand's own arguments.
FLAG_FILE_PATTERNS: dict[str, list[str]] = {
    "sglang": [r"^sglang/srt/server_args\.py$", r"^sglang/srt/arg_groups/.*\.py$"],
    "vllm": [
        r"^vllm/engine/arg_utils\.py$",
        r"^vllm/entrypoints/[a-z_]+/cli_args\.py$",
        r"^vllm/entrypoints/cli/serve\.py$",
        r"^vllm/config(\.py|/[a-z_]+\.py)$",  # the config dataclasses get_kwargs reads (choices, the speculative method)
    ],
}
