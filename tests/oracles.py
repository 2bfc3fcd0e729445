"""The Eagle3 draft modules of the `speculators` and `specforge` packages, run as independent oracles.

Both packages are installed ``--no-deps`` (Makefile): their draft modules need only torch,
transformers, pydantic (speculators) and accelerate/psutil (specforge). speculators' package
``__init__`` also imports its training stack (openai, datasets, hs_connectors), which the draft
never touches, so :func:`speculators_eagle3` imports the draft files themselves under package
shells instead of running that ``__init__``. Nothing of either package is re-implemented here:
only their own classes run, and their own ``save_pretrained`` writes the checkpoints.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import torch

SPECULATORS_VERSION = "0.9.0"
SPECFORGE_VERSION = "0.2.0"


def _no_compile() -> None:
    # specforge's RMSNorm is @torch.compile(dynamic=True): eager on CPU, no C++ toolchain needed.
    import torch._dynamo

    torch._dynamo.config.disable = True


def speculators_eagle3() -> types.SimpleNamespace:
    """speculators' Eagle3 config class, draft model class and proposal config (or ImportError)."""
    if "speculators.models.eagle3.core" not in sys.modules:
        spec = importlib.util.find_spec("speculators")
        if spec is None or spec.origin is None:
            raise ImportError("speculators is not installed (make install puts it in, --no-deps)")
        root = os.path.dirname(spec.origin)

        def shell(name: str, path: str) -> types.ModuleType:
            m = types.ModuleType(name)
            m.__path__ = [path]  # a package without running its __init__
            sys.modules[name] = m
            return m

        sp = shell("speculators", root)
        shell("speculators.models", os.path.join(root, "models"))
        e3 = shell("speculators.models.eagle3", os.path.join(root, "models", "eagle3"))
        import speculators.config as c

        for n in ("SpeculatorModelConfig", "SpeculatorsConfig", "VerifierConfig", "reload_schemas"):
            setattr(sp, n, getattr(c, n))
        import speculators.model as m

        sp.SpeculatorModel = m.SpeculatorModel
        import speculators.models.eagle3.config as cfgm

        e3.Eagle3SpeculatorConfig = cfgm.Eagle3SpeculatorConfig
        import speculators.models.eagle3.core  # noqa: F401

        c.reload_schemas()  # what the package __init__ would do: resolve the pydantic forward refs
    _no_compile()
    import speculators.models.eagle3.config as cfgm
    import speculators.models.eagle3.core as core

    return types.SimpleNamespace(Config=cfgm.Eagle3SpeculatorConfig, Model=core.Eagle3DraftModel)


def specforge_eagle3() -> Any:
    """specforge's LlamaForCausalLMEagle3 class (or ImportError)."""
    import warnings

    _no_compile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flash_attn is not found": the sdpa backend is used
        from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
    return LlamaForCausalLMEagle3


def randomize(model: torch.nn.Module, seed: int, vocab: int, draft_vocab: int) -> None:
    """Random weights everywhere (norm scales around 1, so every norm matters), a random d2t."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        if getattr(model, "d2t", None) is not None:
            tgt = torch.randperm(vocab, generator=g)[:draft_vocab].sort().values
            model.d2t.copy_(tgt - torch.arange(draft_vocab))
            model.t2d.zero_()
            model.t2d[tgt] = True


def speculators_logits(model: torch.nn.Module, aux: torch.Tensor, ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Per TTT step, the logits speculators' own forward computes (caught at its lm_head)."""
    out: list[torch.Tensor] = []
    hook = model.lm_head.register_forward_hook(lambda _m, _i, o: out.append(o.detach().clone()))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # speculators 0.9.0 passes past_key_values to transformers' LlamaAttention
            # (models/eagle3/model_definitions.py:87), deprecated in transformers 5.x: the oracle's
            # own call, nothing the doctor does
            warnings.filterwarnings("ignore", message="`past_key_values` is deprecated", category=FutureWarning)
            model(hidden_states=aux, input_ids=ids, document_ids=torch.zeros_like(ids), ttt_steps=steps)
    finally:
        hook.remove()
    return out


def specforge_logits(model: torch.nn.Module, aux: torch.Tensor, ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """specforge's TTT loop as its trainer runs it (algorithms/eagle3/model.py:315-432, sdpa backend)."""
    B, T = ids.shape
    out = []
    with torch.no_grad():
        h = model.project_hidden_states(aux)
        pos = torch.arange(T).unsqueeze(0)
        mask = model.prepare_decoder_attention_mask(
            attention_mask=torch.ones(B, T, dtype=torch.bool),
            hidden_states=h,
            batch_size=B,
            seq_length=T,
            past_key_values_length=0,
        )
        cache: list[list[torch.Tensor]] = [[], []]
        step_ids = ids
        for _ in range(steps):
            emb = model.embed_input_ids(step_ids).to(h.dtype)
            h = model.backbone(
                input_embeds=emb,
                hidden_states=h,
                cache_hidden=cache,
                attention_mask=mask,
                position_ids=pos,
                past_key_values=None,
                use_cache=True,
            )
            out.append(model.compute_logits(h))
            # specforge `padding(x, left=False)`: shift left by one, pad the end
            step_ids = torch.cat([step_ids[:, 1:], torch.zeros_like(step_ids[:, :1])], dim=1)
    return out


def doctor_logits(
    path: Path,
    aux: torch.Tensor,
    ids: torch.Tensor,
    steps: int,
    *,
    first_position: int,
    target_embed: torch.Tensor | None = None,
    override: dict | None = None,
) -> list[torch.Tensor]:
    from eagle3_doctor.draft.formats import read_draft

    d, _ = read_draft(path, device="cpu", dtype=torch.float32, target_embed=target_embed)
    for k, v in (override or {}).items():
        setattr(d.config, k, v)  # the forward reads the flags at run time
    B, T = ids.shape
    pos = (first_position + torch.arange(T)).expand(B, T)
    with torch.no_grad():
        return [d.logits(h) for h in d.unroll(aux, ids, steps, positions=pos)]


def max_rel_err(ours: list[torch.Tensor], ref: list[torch.Tensor]) -> list[float]:
    """Per step k (0-based), max |ours - ref| / max |ref| over the positions t < T - k that step k
    defines (later positions read padding in every implementation, differently)."""
    errs = []
    for k, (a, b) in enumerate(zip(ours, ref)):
        T = b.shape[1]
        a, b = a[:, : T - k], b[:, : T - k]
        errs.append(float((a - b).abs().max() / b.abs().max()))
    return errs
