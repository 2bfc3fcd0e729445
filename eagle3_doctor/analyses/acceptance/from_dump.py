"""Acceptance from the serving engine's own capture, with only the draft loaded: for targets of any size.

An engine dump of prompt + continuation (vLLM's hidden-states extraction with ``include_output_tokens``, SGLang's
dumper of one extend over the whole sequence) holds everything the estimator reads of the target along a greedy
continuation: the aux states at every position (what the engine feeds the draft) and the tokens. The target's
argmax at t is the recorded token at t+1 *when the continuation was decoded greedily*, so the labels need no target
head and no target forward. What the draft still needs of the target is its embeddings where the checkpoint ships
none: that one tensor is read from the target's safetensors by its header, never the rest of the weights.

Stated assumption, named in every run's notes: the continuation is the target's greedy output (temperature 0). The
doctor cannot check the target's argmax without the target; it checks what the dump alone shows (the prompt is a
prefix of the recorded tokens, a continuation exists, two copies of one prompt continue alike).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...core.errors import BadInput
from ..engine_dump import EngineSeq, load_engine_dump
from ..results import AcceptanceRun, RunSettings
from .options import AcceptanceOptions, Progress, _no_progress

GREEDY_ASSUMED = (
    "assumed: the dump's continuation is the target's greedy output (the engine ran at temperature 0); "
    "without the target its argmax cannot be checked, so the recorded next token stands in for it"
)


# what the judgment of a dump-only run could not look at, said in its verdict
ALONE = "a dump holds what the engine fed only"
UNSEEN = [
    "the training path (compare-hidden --engine-dump --train-dump diffs the dump against a training dump)",
    "the weights' own fit (it replays the target at other capture points)",
    "the draft's own training sample (diagnose --train-data)",
]


@dataclass
class DumpSetup:
    """What acceptance's findings and judgment read of a Setup, with no target: the draft and the engine."""

    draft: Any
    info: Any
    serving: Any
    train_spec: Any = None
    train_source: str = "unknown (no target: the training side is not measured from a dump)"
    notes: list[str] = field(default_factory=list)
    target: Any = None  # diagnose's replay reads the rows' width and dtype here


@dataclass
class DumpServing:
    """The engine as the dump shows it: what it fed is the dump's own tensors, not capture points named here."""

    engine: str
    label: str
    spec: tuple[Any, ...] = ()
    failure: Any = None
    source: str = ""


def embed_from_target(target: str | None, vocab: int, hidden: int) -> Any:
    """The target's embed_tokens [V, H] read by header from its safetensors (one tensor), or a one-line refusal."""
    from ...io.safeio import check_safetensors_header, read_array

    fix = "pass --target DIR (only its embed_tokens tensor is read, by header) or a draft that ships its own embed_tokens"
    if target is None:
        raise BadInput("the draft ships no embed_tokens and no --target was given to read them from", fix)
    root = Path(target)
    try:
        index = root / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text()).get("weight_map", {})
            files = sorted({root / f for n, f in weight_map.items() if n.endswith("embed_tokens.weight")})
        else:
            files = sorted(root.glob("*.safetensors"))
    except (OSError, ValueError) as e:
        raise BadInput(f"the draft ships no embed_tokens and {target} cannot be read ({e})", fix) from None
    for f in files:
        header = check_safetensors_header(f)
        for name in sorted(n for n in header if n.endswith("embed_tokens.weight") and "mtp" not in n):
            arr = read_array(f, name)
            if arr is not None and tuple(arr.shape) == (vocab, hidden):
                return arr.to_torch()
    raise BadInput(f"the draft ships no embed_tokens and {target} holds no embed_tokens.weight of shape [{vocab}, {hidden}]", fix)


def load_dump_draft(draft: str, target: str | None, draft_format: str | None, device: str) -> tuple[Any, Any]:
    """The draft in float32 on ``device`` (cast to the dump's dtype later), the target's embeddings attached by header."""
    from ...draft.formats import read_draft

    d, info = read_draft(draft, fmt=draft_format, device=device, dtype=None)
    if d.embed_tokens is None:
        weight = embed_from_target(target, d.config.vocab_size, d.config.hidden_size)
        d.set_embeddings(weight.to(device=device, dtype=next(d.parameters()).dtype), own=False)
    return d, info


class _IdsOnly:
    """A tokenizer where none may be read: token-id prompts pass (checked against the draft's vocabulary), text is refused."""

    chat_template = None

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def __len__(self) -> int:
        return self.vocab

    def __call__(self, *_a: Any, **_k: Any) -> Any:
        raise BadInput(
            "text prompts need the target's tokenizer, and no --target was given",
            "pass --prompts with input_ids records, or --target DIR (its tokenizer files are read, not its weights)",
        )


def dump_prompts(
    prompts_path: str | None,
    target: str | None,
    vocab: int,
    max_tokens: int | None,
    limit: int | None,
    trust_remote_code: bool = False,
) -> list[list[int]]:
    """The prompts the dump was made from, as token ids: input_ids records as written, text through the target's
    tokenizer (its tokenizer files only) where --target names a local directory."""
    from ...io.prompts import load_prompts

    if prompts_path is None:
        raise BadInput(
            "acceptance from an engine dump needs the prompts the dump was made from",
            "pass --prompts FILE (input_ids records, or text with --target DIR): only what follows each prompt is the "
            "target's greedy output",
        )
    tok: Any = _IdsOnly(vocab)
    if target is not None and Path(target).is_dir():
        from ...model.tokenizer import load_tokenizer

        tok = load_tokenizer(target, trust_remote_code)
    return [p.ids for p in load_prompts(tok, prompts_path, max_tokens=max_tokens, limit=limit)]


@dataclass
class DumpSequence:
    """One dump sequence as the estimator walks it: tokens x_0.., the aux row of each, where the decode begins."""

    tokens: list[int]
    aux: torch.Tensor  # [len(tokens), n*H]
    start: int  # the prompt's last position: the first base a decode reaches
    source: str


def _aligned(seq: EngineSeq, width: int) -> tuple[list[int], torch.Tensor]:
    """(tokens, aux rows) with aux row t the features of token t. SGLang's draft ids are shifted left by one (token
    t+1 at row t): its first token is not recorded (a placeholder, read by nothing) and its last id, the token the
    target chose after the dump, has no row of its own (a zero row, the base of no draft step)."""
    if seq.aux.shape[1] != width:
        raise BadInput(
            f"{seq.source}: aux rows are {seq.aux.shape[1]} wide, the draft's fc takes {width}",
            "pass the draft served with this dump (or every rank's files of it)",
        )
    if seq.ids_shift == 0:
        return seq.ids.tolist(), seq.aux
    return [-1, *seq.ids.tolist()], torch.cat([seq.aux, seq.aux.new_zeros(1, width)])


def dump_sequences(
    engine_dump: str, prompt_ids: Sequence[Sequence[int]], n_slots: int, width: int
) -> tuple[list[DumpSequence], Any, list[str]]:
    """Every dump sequence paired with the prompt it continues; refused where the dump cannot say where the decode begins."""
    ed = load_engine_dump(engine_dump, n_slots=n_slots, width=width)
    prompts = [list(p) for p in prompt_ids]
    if not prompts:
        raise BadInput(
            "acceptance from an engine dump needs the prompts the dump was made from",
            "pass --prompts FILE (input_ids records): only the continuation after each prompt is the target's greedy output",
        )
    out: list[DumpSequence] = []
    seen: dict[tuple[int, ...], list[int]] = {}
    skipped: list[str] = []
    for seq in ed.seqs:
        tokens, aux = _aligned(seq, width)
        skip = seq.ids_shift  # SGLang: token 0 is not recorded
        p = max((q for q in prompts if len(q) > skip and tokens[skip : len(q)] == q[skip:]), key=len, default=None)
        if p is None or len(tokens) < len(p) + 2:
            # a live decode's draft extends after each verify, its prefill's (the prompt and one sampled token), other
            # requests: none is a prompt with a continuation to score
            skipped.append(seq.source)
            continue
        if skip:
            tokens[0] = p[0]
        cont = tokens[len(p) :]
        prev = seen.setdefault(tuple(p), cont)
        n = min(len(prev), len(cont))
        if prev[:n] != cont[:n]:
            raise BadInput(
                f"{seq.source}: the same prompt continues differently in two sequences of the dump",
                "dump a greedy decode (temperature 0): a sampled continuation is not the target's argmax",
            )
        out.append(DumpSequence(tokens, aux, len(p) - 1, seq.source))
    if not out:
        first = ed.seqs[0]
        raise BadInput(
            f"{engine_dump}: no sequence is one of --prompts followed by a continuation (first: {first.source}, ids "
            f"{first.ids[:6].tolist()})",
            "pass the --prompts the engine was sent (as input_ids), and capture prompt + continuation in one sequence "
            "(vLLM: kv_transfer_params include_output_tokens; SGLang: one extend over both)",
        )
    notes = list(ed.notes)
    if skipped:
        notes.append(f"{len(skipped)} dump sequence(s) are no prompt with a continuation, skipped (first: {skipped[0]})")
    return out, ed, notes


def _check_options(opts: AcceptanceOptions) -> None:
    opts.check()
    if opts.temperature > 0:
        raise BadInput(
            "acceptance at temperature > 0 needs the target's distribution, which a dump does not hold",
            "drop --temperature (a dump-only run measures greedy acceptance) or load --target",
        )
    if opts.topk > 1 or opts.token_tree:
        raise BadInput("a tree's acceptance from a dump is not measured here", "use --topk 1 (a chain) or load --target")
    if opts.reference or opts.scan:
        raise BadInput("--reference-loop and --scan run the target", "drop them for a dump-only run")


@torch.inference_mode()
def acceptance_from_dump(
    draft: str,
    engine_dump: str,
    opts: AcceptanceOptions,
    *,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    prompts_path: str | None = None,
    target: str | None = None,
    draft_format: str | None = None,
    engine: str = "sglang",
    release: str | None = None,
    device: str = "cpu",
    trust_remote_code: bool = False,
    progress: Progress = _no_progress,
) -> tuple[AcceptanceRun, DumpSetup]:
    """Acceptance of ``draft`` on the engine's own capture: one path, what the engine fed ("serving").

    The prompts the dump was made from say where each decode begins: ``prompt_ids``, or ``prompts_path`` read as
    :func:`dump_prompts` reads it. ``target`` is read only for its embed_tokens (and tokenizer, for text prompts)."""
    from .findings import acceptance_findings, triage

    _check_options(opts)
    d, info = load_dump_draft(draft, target, draft_format, device)
    seqs, ed, notes = prepared(d, engine_dump, opts, prompt_ids, prompts_path, target, trust_remote_code)
    res = _walk(d, seqs, opts, progress)
    setup = dump_setup(d, info, ed, engine, release, engine_dump, target, notes)
    serving, dtype = setup.serving, seqs[0].aux.dtype
    results = {"serving": res}
    settings = _settings(info, serving.label, serving.source, opts.num_steps, dtype, str(next(d.parameters()).device), seqs)
    findings = acceptance_findings(results, None, setup, unseen=UNSEEN, alone=ALONE)  # type: ignore[arg-type]  # DumpSetup: what findings read
    res.triage = triage(res, settings.dtype)
    return AcceptanceRun(results, settings, findings, setup.notes, None, None), setup


def prepared(
    d: Any,
    engine_dump: str,
    opts: AcceptanceOptions,
    prompt_ids: Sequence[Sequence[int]] | None,
    prompts_path: str | None,
    target: str | None,
    trust_remote_code: bool,
) -> tuple[list[DumpSequence], Any, list[str]]:
    """The dump's scorable sequences (at most --limit), the dump, its notes; the draft cast to the dump's dtype."""
    n_slots, width = d.config.num_aux_states, d.config.fc_in_features
    if prompt_ids is None:
        prompt_ids = dump_prompts(prompts_path, target, d.config.vocab_size, opts.max_tokens, None, trust_remote_code)
    seqs, ed, notes = dump_sequences(engine_dump, prompt_ids, n_slots, width)
    if opts.limit:
        seqs = seqs[: opts.limit]
    d.to(seqs[0].aux.dtype)
    return seqs, ed, notes


def dump_setup(
    d: Any, info: Any, ed: Any, engine: str, release: str | None, engine_dump: str, target: str | None, notes: list[str]
) -> DumpSetup:
    """The engine as the dump shows it, and the run's notes (the greedy assumption first)."""
    # the layout says which engine wrote it; its release only where the run named that engine
    wrote = {"sglang-dumper": "sglang", "vllm-hidden-states": "vllm"}.get(ed.format, engine)
    label = f"{wrote}{' ' + release if release and wrote == engine else ''} (its own capture)"
    serving = DumpServing(wrote, label, source=f"engine dump {engine_dump} ({ed.format})")
    notes = [GREEDY_ASSUMED, *notes, "the target was not loaded: the draft ran on the engine's own capture"]
    if not getattr(d, "embeddings_are_own", True):
        notes.append(f"the draft ships no embed_tokens: the target's were read by header from {target} (no other weight)")
    return DumpSetup(d, info, serving, notes=notes)


def _walk(d: Any, seqs: list[DumpSequence], opts: AcceptanceOptions, progress: Progress) -> Any:
    """The serving path's figures: the estimator over every sequence, batched longest first as the replay batches,
    each decode walked from its prompt's last position; per-prompt lists back in the dump's order."""
    from ...core.stats import acceptance_intervals
    from ...model.replay import replay_order
    from ...model.target import batches
    from .accumulate import PathAccumulator
    from .estimator import unroll_outcomes
    from .measurement import _to_prompt_order

    dev, width, K = next(d.parameters()).device, d.config.fc_in_features, opts.num_steps
    order = replay_order([s.tokens for s in seqs])
    acc = PathAccumulator("serving", K)
    done = 0
    for _, idx in batches(order, max(1, opts.batch_size)):
        group = [seqs[i] for i in idx]
        T = max(len(s.tokens) for s in group)
        tokens = torch.zeros(len(group), T, dtype=torch.long)
        aux = torch.zeros(len(group), T, width, dtype=group[0].aux.dtype)
        for b, s in enumerate(group):
            tokens[b, : len(s.tokens)] = torch.as_tensor(s.tokens)
            aux[b, : len(s.tokens)] = s.aux
        tokens, aux = tokens.to(dev), aux.to(dev)
        lens = [len(s.tokens) for s in group]

        def labels(k: int, tokens: torch.Tensor = tokens) -> torch.Tensor:
            return torch.roll(tokens, -(1 + k), dims=1)  # x_{t+1+k}: the recorded greedy tokens stand in for the argmax

        starts = [s.start for s in group]
        acc.add(unroll_outcomes(d, aux, tokens, labels, lens, K, from_base=min(starts)), starts, lens, walk=True)
        done += len(group)
        progress("acceptance from the engine dump", done, len(seqs))
    res = acc.result()
    res.spec = None
    res.accepted_lengths = _to_prompt_order(res.accepted_lengths, order)
    res.acc_k_by_request = _to_prompt_order(res.acc_k_by_request, order)
    res.step1_counts = _to_prompt_order(res.step1_counts, order)
    res.intervals = acceptance_intervals(res.counts(K), K)
    return res


def _settings(
    info: Any, engine: str, source: str, K: int, dtype: torch.dtype, device: str, seqs: list[DumpSequence]
) -> RunSettings:
    return RunSettings(
        target="(not loaded: the engine's own capture)",
        draft=_draft_summary(info),
        engine=engine,
        num_steps=K,
        continuation="greedy",
        max_new_tokens=None,
        temperature=0.0,
        temperature_mode=None,
        topk=1,
        num_draft_tokens=None,
        dtype=str(dtype).replace("torch.", ""),
        device=device,
        compiled=False,
        sequences=len(seqs),
        tokens=sum(len(s.tokens) for s in seqs),
        serving_spec=(),
        serving_source=source,
        training_spec=None,
        training_source=None,
    )


def _draft_summary(info: Any) -> dict[str, Any] | None:
    if info is None:
        return None
    return {"path": info.path, "format": info.format, "format_reason": info.format_reason, "layer_ids": info.layer_ids,
            "layer_ids_key": info.layer_ids_key, "other_layer_id_keys": info.other_layer_id_keys, "dtype": info.weight_dtype}  # fmt: skip
