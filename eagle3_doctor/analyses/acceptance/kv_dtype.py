"""FWD015: the draft's attention served with an fp8 KV cache it was not trained with, and what that costs.

The KV dtype each release gives the draft for the launch's target ``--kv-cache-dtype`` and draft-only setting is
executed from the release's own code (``engines/draft_kv_dtype.py``). The cost is measured on the user's pair: the
draft's sequential chain decode over the replayed prompts (``faults/simulate.py``), once as it runs in the run's
dtype and once with every key and value it reads rounded through the served fp8 dtype at scale 1 (the
``kv-fp8-noise`` fault class with the served dtype), paired over prompts."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from ...core.findings import LAUNCH_FLAGS, SERVER_COMMAND, Finding, Fix, Location
from ...core.stats import MIN_PROMPTS, Interval, acceptance_counts, mean_acceptance_length, paired

NAMES = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def kv_dtype_findings(setup: Any, serve: Any, rep: Any, paths: dict[str, Any], drafts: dict[str, Any]) -> list[Finding]:
    """FWD015 where the launch serves the draft's KV cache in fp8, measured on the serving features through the draft
    as the release runs it; quiet where the release keeps the draft's own dtype, or where the launch's values were
    not executed (a dtype outside the probed ones)."""
    from ..as_served import AS_SERVED

    version = getattr(setup.serving, "version", None)
    got = _served_fp8(setup.serving.engine, version, serve) if "serving" in paths else None
    if got is None or version is None:
        return []
    spec, draft = paths["serving"], drafts.get(AS_SERVED, drafts["serving"])
    cost = _measure(setup, rep, spec, draft, got.dtype)
    config = (setup.info.config or {}) if getattr(setup, "info", None) is not None else {}
    return [_finding(setup.serving.engine, config, serve, version, got, cost)]


def kv_rule_findings(engine: str, version: str | None, config: dict[str, Any], serve: Any) -> list[Finding]:
    """FWD015 from the launch and the release's rule alone, for a command that runs no forward (inspect): a warning
    whose cost is undetermined, naming the run that measures it."""
    got = _served_fp8(engine, version, serve)
    if got is None or version is None:
        return []
    why = "not measured: inspect runs no forward; eagle3-doctor acceptance with the same --serve-cmd measures it"
    return [_finding(engine, config, serve, version, got, why)]


def _served_fp8(engine: str, version: str | None, serve: Any) -> Any:
    """The KV dtype the release gives the draft for the launch, where it is an fp8 one the cost can be measured for;
    None where no launch or release is named, the engine is not modelled, or the draft keeps another dtype."""
    from ...engines.draft_kv_dtype import served_kv

    if serve is None or version is None or engine not in ("sglang", "vllm"):
        return None
    got = served_kv(engine, version, serve.kv_cache_dtype, serve.draft_kv_cache_dtype)
    return got if got is not None and got.dtype in NAMES else None


def _measure(setup: Any, rep: Any, spec: Any, draft: Any, dtype: str) -> tuple[Interval, Interval, Interval, float, int] | str:
    """(as run, with the KV rounded, rounded - as run, the largest |key| or |value| read, the steps a pass) over the
    prompts, or why it was not measured."""
    import torch

    from ..faults.classes import CLASSES, fp8_round
    from ..faults.simulate import simulate_all, traces

    opts = rep.opts
    if opts.continuation != "greedy":
        return "not measured: the simulation follows the target's greedy continuation (--continuation greedy)"
    if len(rep.seqs) < MIN_PROMPTS:
        return f"not measured: fewer than {MIN_PROMPTS} prompts"
    peak = [0.0]
    rounding = partial(fp8_round, dtype=getattr(torch, NAMES[dtype]))

    def read(x: torch.Tensor) -> torch.Tensor:
        peak[0] = max(peak[0], float(x.abs().max()))
        return rounding(x)

    fault = replace(next(c for c in CLASSES if c.name == "kv-fp8-noise"), kv_read=read)
    K, bs = opts.num_steps, opts.batch_size
    rows = traces(setup.target, rep.seqs, rep.starts, spec, bs, rep.recorded)
    base = simulate_all(draft, rows, K, None, bs)
    low = simulate_all(draft, rows, K, fault, bs)
    counts = [acceptance_counts(a, None, None, K) for a in (base, low)]
    (iv_base, iv_low), (_, diff) = paired(counts, mean_acceptance_length, 0)
    return iv_base, iv_low, diff, peak[0], K


def _finding(engine: str, config: dict[str, Any], serve: Any, version: str, got: Any, cost: Any) -> Finding:
    from ...engines.draft_kv_dtype import DRAFT_KEY
    from ...engines.releases import release_label

    label = release_label(engine, version)
    trained = config.get("torch_dtype") or "16-bit or wider (no torch_dtype)"
    launch = f"--kv-cache-dtype {serve.kv_cache_dtype or 'unset (auto)'}"
    if serve.draft_kv_cache_dtype is not None:
        launch += f", {DRAFT_KEY[engine]} {serve.draft_kv_cache_dtype}"
    evidence = [
        f"the checkpoint: {trained} (the draft config's torch_dtype)",
        f"the launch: {launch}",
        f"{got.source}: the draft's KV cache is {got.dtype}",
    ]
    reads = ["--kv-cache-dtype"] if serve.kv_cache_dtype is not None else []  # the launch flags the dtype was read from
    if got.key is None and serve.draft_kv_cache_dtype is not None:
        evidence.append(
            f"{label} has no {DRAFT_KEY[engine]} setting (first in {got.first_key}): its draft runner reads only the "
            "target's --kv-cache-dtype"
        )
    elif serve.draft_kv_cache_dtype is not None:
        reads.append(DRAFT_KEY[engine].split()[0])
    severity = "warning"
    data: dict[str, Any] = {"served": got.dtype, "target_kv_cache_dtype": serve.kv_cache_dtype,
                            "draft_kv_cache_dtype": serve.draft_kv_cache_dtype, LAUNCH_FLAGS: reads}  # fmt: skip
    if isinstance(cost, str):
        evidence.append(f"cost undetermined, {cost}")
    else:
        base, low, diff, peak, K = cost
        top = {"fp8_e4m3": 448, "fp8_e5m2": 57344}[got.dtype]
        within = diff.lo <= 0 <= diff.hi
        evidence.append(
            f"measured cost on this pair ({diff.n} prompts, greedy chain decode, {K} steps a pass): mean acceptance "
            f"length {base.text(3)} as run, {low.text(3)} with every key and value the draft reads rounded to "
            f"{got.dtype} at scale 1; difference {diff.text(3)}"
            + (" (95% interval over prompts): within noise on these prompts" if within else " (95% interval over prompts)")
        )
        evidence.append(f"largest |key| or |value| the draft read: {peak:.3g} ({got.dtype} saturates at {top})")
        severity = "error" if diff.hi < 0 else "warning"
        data |= {"cost": round(diff.point, 4), "cost_interval": [round(diff.lo, 4), round(diff.hi, 4)], "peak": peak}
    return Finding(
        "FWD015",
        f"{label} serves the draft's KV cache in {got.dtype}; the draft checkpoint is {trained}",
        evidence,
        _fix(engine, version, label, serve, got),
        severity=severity,
        location=Location(SERVER_COMMAND, key=DRAFT_KEY[engine] if got.key else "--kv-cache-dtype"),
        data=data,
    )


def _fix(engine: str, version: str, label: str, serve: Any, got: Any) -> Any:
    """The draft-only setting that keeps the draft's KV in its own dtype where the release has one (executed: it
    gives 'model'), else the first release that has it."""
    from ...engines.draft_kv_dtype import served_kv

    if got.key is not None and (ok := served_kv(engine, version, serve.kv_cache_dtype, "auto")) and ok.dtype == "model":
        if engine == "sglang":
            return Fix(
                f"launch with --speculative-draft-kv-cache-dtype auto ({label} then gives the draft its own dtype and "
                f"keeps --kv-cache-dtype {serve.kv_cache_dtype} for the target)",
                file=SERVER_COMMAND,
                key="--speculative-draft-kv-cache-dtype",
                value="auto",
                op="set",
                snippet="--speculative-draft-kv-cache-dtype auto",
            )
        return Fix(
            f'add "kv_cache_dtype": "auto" to --speculative-config ({label} then gives the draft the model\'s dtype, '
            f"config/cache.py: auto = the model dtype, and keeps --kv-cache-dtype {serve.kv_cache_dtype} for the target)",
            file=SERVER_COMMAND,
            key="--speculative-config.kv_cache_dtype",
            value="auto",
            op="set",
            snippet='"kv_cache_dtype": "auto"',
        )
    name = {"sglang": "SGLang", "vllm": "vLLM"}[engine]
    key = "--speculative-draft-kv-cache-dtype auto" if engine == "sglang" else '"kv_cache_dtype": "auto" in --speculative-config'
    return (
        f"upgrade to {name} >= {got.first_key} and launch with {key} (the draft then keeps its own dtype), or "
        f"serve the target without --kv-cache-dtype {serve.kv_cache_dtype} on {label}"
    )
