"""Hidden states captured by the serving engine itself, and dump-vs-dump comparison without the target.

Two on-disk layouts, as the engines write them:

SGLang debug dumper (``sglang/srt/debug_utils/dumper.py``, 0.5.23): one ``torch.save`` file per
tensor, ``{dir}/{exp_name}/step=S___rank=R___dump_index=I___name=NAME___....pt`` (``_format_tags``,
line 1298, and ``_dump_single``, lines 590-636), holding ``{"value": tensor, "meta": {...}}``.
Run with ``DUMPER_ENABLE=1 DUMPER_NON_INTRUSIVE_MODE=all`` (``model_runner.py:1396``), the draft
model's ``fc`` input, ``non_intrusive__model.fc.inputs.0`` [T, n*H], is the concatenated aux
hidden states the engine feeds the draft (``srt/models/llama_eagle3.py:237-247``), and
``non_intrusive__model.embed_tokens.inputs.0`` (or the ``input_ids`` core field) the draft's
input ids, which SGLang shifts left by one on extend: hidden state t is paired with token t+1.

vLLM hidden-states extraction (speculators data generation, 0.33.0): one safetensors file per
request with ``hidden_states`` [T, n, H] and ``token_ids`` [T]
(``distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py:415-418``).

Both are compared with a training dump of the same tokens, slot by slot, with no target loaded:
each engine slot is matched numerically to a training slot (relative L2), and a slot that matches
none is tested for being the token embeddings (vectors that depend only on the token id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.errors import BadInput

if TYPE_CHECKING:
    from .compare.numeric import Matrix

SGL_AUX = "non_intrusive__model.fc.inputs.0"
SGL_IDS = ("input_ids", "non_intrusive__model.embed_tokens.inputs.0")
SAME_REL = 0.05  # relative L2 under which two slots hold the same capture point (bf16 vs fp32 is ~0.005)


@dataclass
class EngineSeq:
    source: str
    ids: torch.Tensor  # [T] token ids as the engine recorded them
    aux: torch.Tensor  # [T, n*H]
    ids_shift: int  # 1: ids[t] is the token AFTER the one whose hidden state is at t (SGLang draft extend)


@dataclass
class EngineDump:
    format: str
    path: str
    seqs: list[EngineSeq]
    hidden_size: int | None  # known from the layout ([T, n, H]) or None
    notes: list[str] = field(default_factory=list)


def _tags(name: str) -> dict[str, str]:
    out = {}
    for part in name[: -len(".pt")].split("___"):
        k, sep, v = part.partition("=")
        if sep:
            out[k] = v
    return out


def _sgl_value(f: Path) -> torch.Tensor:
    from ..io.safeio import load_pickle

    d = load_pickle(f)
    if not isinstance(d, dict) or not isinstance(d.get("value"), torch.Tensor):
        raise BadInput(
            f"{f} is not an SGLang dumper file ({{'value': tensor, 'meta': ...}})", "pass the dumper's output directory"
        )
    return d["value"]


def _natural(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def join_ranks(parts: Sequence[torch.Tensor], where: str, n_slots: int | None, width: int | None) -> tuple[torch.Tensor, str]:
    """One rank's aux rows from every rank's copy, in rank order: (rows, how they were joined).

    Under tensor parallelism the residual stream is all-reduced before any layer output is captured, so every
    rank normally holds the whole [T, n*H] and the copies must agree; a capture taken before that reduction
    (or an engine that shards the hidden dimension) holds 1/R of each slot's H per rank, joined slot by slot in
    rank order. ``width`` (the draft's fc input) tells the two apart; without it, agreeing copies are replicated."""
    first = parts[0]
    if len(parts) == 1:
        return first, "one rank"  # as stored: [T, n, H] (vLLM) or [T, n*H] (SGLang)
    R = len(parts)
    if any(p.shape != first.shape for p in parts):
        raise BadInput(
            f"{where}: the ranks hold {', '.join(str(tuple(p.shape)) for p in parts)}, not one shape",
            "pass the dump of one run, every rank's files unedited",
        )
    row = first[0].numel() if first.shape[0] else 0  # one position's aux: n*H, or n*H/R sharded
    sharded = width is not None and row * R == width and row != width
    if not sharded:
        ref = first.float()
        for r, p in enumerate(parts[1:], start=1):
            rel = float((p.float() - ref).norm() / ref.norm().clamp_min(1e-12))
            if rel > 1e-3:
                raise BadInput(
                    f"{where}: rank {r} holds other aux states than rank 0 (relative L2 {rel:.3g}) and together they "
                    f"are not the draft's fc width{f' {width}' if width else ''}",
                    "pass the dump of one run (every rank of one tensor-parallel group)",
                )
        return first, f"replicated across {R} ranks (checked equal)"
    if first.dim() == 3:  # [T, n, H/R]: the slot axis is explicit
        return torch.cat(list(parts), dim=-1).reshape(
            first.shape[0], -1
        ), f"hidden dim sharded over {R} ranks, joined in rank order"
    if not n_slots or first.shape[-1] % n_slots:
        raise BadInput(f"{where}: sharded aux rows of width {first.shape[-1]} do not split into slots", "pass --draft")
    T = first.shape[0]
    joined = torch.cat([p.reshape(T, n_slots, -1) for p in parts], dim=-1)  # [T, n, H]: each slot's shards in rank order
    return joined.reshape(T, -1), f"hidden dim sharded over {R} ranks, joined slot by slot in rank order"


def _load_sglang(files: list[Path], root: str, n_slots: int | None = None, width: int | None = None) -> EngineDump:
    steps: dict[str, dict[str, dict[str, Path]]] = {}  # step -> rank -> name -> file
    for f in files:
        t = _tags(f.name)
        if "name" not in t or "step" not in t:
            continue
        steps.setdefault(t["step"], {}).setdefault(t.get("rank", "0"), {})[t["name"]] = f
    seqs: list[EngineSeq] = []
    ranks = sorted({r for by_rank in steps.values() for r in by_rank}, key=_natural)
    joins = set()
    for step, by_rank in sorted(steps.items(), key=lambda kv: _natural(kv[0])):
        order = sorted(by_rank, key=_natural)
        if not any(SGL_AUX in by_rank[r] for r in order):
            continue
        aux_parts, ids = [], None
        for r in order:
            names = by_rank[r]
            idf = next((names[n] for n in SGL_IDS if n in names), None)
            if SGL_AUX not in names or idf is None:
                raise BadInput(
                    f"{root}: step {step} rank {r} has no {SGL_AUX if SGL_AUX not in names else 'input ids (' + ' or '.join(SGL_IDS) + ')'}",
                    "dump with DUMPER_NON_INTRUSIVE_MODE=all and a DUMPER_FILTER that keeps the fc and embed_tokens inputs",
                )
            aux, rid = _sgl_value(names[SGL_AUX]), _sgl_value(idf)
            if aux.dim() != 2 or rid.dim() != 1 or aux.shape[0] != rid.shape[0] or rid.is_floating_point():
                raise BadInput(
                    f"{root}: step {step}: fc input {tuple(aux.shape)} and input ids {tuple(rid.shape)} do not pair up "
                    "([T, n*H] and [T])",
                    "dump one extend (prefill) step per file set, unedited",
                )
            if ids is not None and not torch.equal(ids, rid.long()):
                raise BadInput(
                    f"{root}: step {step}: rank {r} fed other input ids than rank {order[0]}", "pass the dump of one run"
                )
            ids = rid.long()
            aux_parts.append(aux)
        assert ids is not None  # at least one rank holds the step
        aux, how = join_ranks(aux_parts, f"{root} step {step}", n_slots, width)
        joins.add(how)
        seqs.append(EngineSeq(f"{root} step {step}", ids, aux, 1))
    if not seqs:
        raise BadInput(
            f"{root} has SGLang dumper files but none named {SGL_AUX}",
            "run the draft with DUMPER_ENABLE=1 DUMPER_NON_INTRUSIVE_MODE=all (the fc input is the fed features)",
        )
    notes = [f"SGLang dumper: {len(seqs)} extend step(s); draft input ids are shifted left by one (token t+1 at t)"]
    if len(ranks) > 1:
        notes.append(f"ranks {', '.join(ranks)}: aux states {'; '.join(sorted(joins))}")
    return EngineDump("sglang-dumper", root, seqs, None, notes)


def _load_vllm(files: list[Path], root: str, width: int | None = None) -> EngineDump:
    """One request per file name; the same name under several rank folders is one request's copies (vLLM's
    connector writes from tensor-parallel rank 0 only; data-parallel workers each write their own requests)."""
    from ..io.safeio import load_file

    by_name: dict[str, list[Path]] = {}
    for f in sorted(files, key=lambda f: _natural(str(f))):
        by_name.setdefault(f.name, []).append(f)
    seqs, H, joins = [], None, set()
    for name in sorted(by_name, key=_natural):
        parts, ids = [], None
        for f in by_name[name]:
            d = load_file(f)
            if "hidden_states" not in d or "token_ids" not in d:
                raise BadInput(
                    f"{f} has no hidden_states/token_ids (keys: {', '.join(d)})",
                    "pass the files vLLM's hidden-states extraction wrote (speculators data generation)",
                )
            hs, tid = d["hidden_states"], d["token_ids"]
            if hs.dim() != 3 or tid.dim() != 1 or hs.shape[0] != tid.shape[0] or tid.is_floating_point():
                raise BadInput(
                    f"{f}: hidden_states {tuple(hs.shape)} / token_ids {tuple(tid.shape)}, expected [T, n, H] and [T]",
                    "pass the files unedited",
                )
            if ids is not None and not torch.equal(ids, tid.long()):
                raise BadInput(f"{f}: other token ids than {by_name[name][0]} for the same request", "pass the dump of one run")
            ids = tid.long()
            parts.append(hs)
        assert ids is not None
        hs, how = join_ranks(parts, f"{root}: {name}", None, width)
        joins.add(how)
        h = int(hs.shape[-1])  # joined: [T, n, H]
        if H is not None and h != H:
            raise BadInput(f"{by_name[name][0]}: hidden size {h} differs from the other files' {H}", "use files from one run")
        H = h
        seqs.append(EngineSeq(str(by_name[name][0]), ids, hs.reshape(hs.shape[0], -1), 0))
    notes = [f"vLLM hidden-states extraction: {len(seqs)} request file(s)"]
    if any(len(v) > 1 for v in by_name.values()):
        notes.append(f"requests written by several ranks: {'; '.join(sorted(joins))}")
    return EngineDump("vllm-hidden-states", root, seqs, H, notes)


def load_engine_dump(path: str, n_slots: int | None = None, width: int | None = None) -> EngineDump:
    """The engine's own capture, every rank joined into one copy (``width``, the draft's fc input, tells a
    sharded hidden dimension from a replicated one; ``n_slots`` splits SGLang's concatenated rows)."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"engine dump {path} does not exist", "pass the SGLang dumper directory or vLLM's hidden-states directory")
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    pt = [f for f in files if f.name.endswith(".pt") and "___" in f.name]
    st = [f for f in files if f.name.endswith(".safetensors")]
    if pt:
        return _load_sglang(pt, path, n_slots, width)
    if st:
        return _load_vllm(st, path, width)
    raise BadInput(
        f"{path} holds neither SGLang dumper files (step=..___name=...pt) nor vLLM hidden-states safetensors",
        "pass the directory the engine wrote",
    )


# --------------------------------------------------------------------------- alignment


def _align(eng: EngineSeq, train_ids: list[torch.Tensor]) -> tuple[int, int, int] | None:
    """(training sequence, engine positions used, training offset) where the tokens agree."""
    e = eng.ids
    for j, t in enumerate(train_ids):
        if eng.ids_shift == 1:
            n = min(e.numel() - 1, t.numel() - 1)  # the last engine id is the sampled next token
            if n > 0 and torch.equal(e[:n], t[1 : n + 1]):
                return j, n, 0
        else:
            n = min(e.numel(), t.numel())
            if n > 0 and torch.equal(e[:n], t[:n]):
                return j, n, 0
    return None


def embed_like(x: torch.Tensor, token_ids: torch.Tensor) -> float | None:
    """Mean relative L2 between the vectors of repeated tokens: ~0 for the embeddings (they do not
    depend on context), large for any layer output. None when no token repeats."""
    x = x.float()
    first: dict[int, int] = {}
    rels = []
    for t, tok in enumerate(token_ids.tolist()):
        if tok in first:
            a, b = x[t], x[first[tok]]
            rels.append(float((a - b).norm() / b.norm().clamp_min(1e-12)))
        else:
            first[tok] = t
    return sum(rels) / len(rels) if rels else None


@dataclass
class DumpPair:
    """Both dumps over the positions where their tokens agree: [N, n*H] each."""

    train: torch.Tensor
    engine: torch.Tensor
    token_ids: torch.Tensor  # [N] the token whose hidden state sits at each row
    seq: torch.Tensor  # [N] engine sequence index
    pos: torch.Tensor  # [N] position in the sequence
    n_seqs: int


def pair_dumps(engine: EngineDump, train: list[Any]) -> DumpPair:
    tids = [s.input_ids for s in train]
    rows_t, rows_e, toks, seq, pos = [], [], [], [], []
    for i, e in enumerate(engine.seqs):
        al = _align(e, tids)
        if al is None:
            raise BadInput(
                f"{e.source}: its tokens match no training dump sequence (first ids {e.ids[:6].tolist()})",
                "dump the engine on the same tokens as the training dump (replay its input_ids as the prompts)",
            )
        j, n, _ = al
        if e.aux.shape[1] != train[j].aux.shape[1]:
            raise BadInput(
                f"{e.source}: width {e.aux.shape[1]} differs from the training dump's {train[j].aux.shape[1]}",
                "compare dumps of the same target with the same number of aux states",
            )
        rows_t.append(train[j].aux[:n].float())
        rows_e.append(e.aux[:n].float())
        toks.append(tids[j][:n])
        seq.append(torch.full((n,), i))
        pos.append(torch.arange(n))
    return DumpPair(torch.cat(rows_t), torch.cat(rows_e), torch.cat(toks), torch.cat(seq), torch.cat(pos), len(engine.seqs))


# --------------------------------------------------------------------------- dump vs dump


def compare_dumps(
    engine_path: str,
    train_dump: str,
    *,
    train_spec: Any,
    train_source: str,
    engine: str,
    engine_version: str | None,
    num_layers: int,
    family: str = "llama",
    limit: int | None = None,
    max_tokens: int | None = None,
) -> Any:
    """A training dump against an engine dump of the same tokens: no target is loaded.

    The training slots are taken as declared (``train_spec``: the draft config or recipe); each
    engine slot is identified numerically against them, and one that matches none is tested for
    being the embeddings. The engine's identified spec then goes through the same symbolic
    diagnosis as compare-hidden, so a slot shift is named with the exact ids to write.
    """
    from ..core.findings import Finding
    from ..engines.releases import check_engine
    from .compare.comparison import CompareResult
    from .compare.numeric import numeric_findings
    from .compare.symbolic import diagnose_specs

    version = check_engine(engine, engine_version)
    n = len(train_spec)
    ed, pair, T, E = _load_pair(engine_path, train_dump, n, train_source, limit, max_tokens)
    rel, cos = _slot_distances(E, T, n)
    notes = list(ed.notes) + [
        f"training slots as declared ({train_source}); without the target they are not identified numerically"
    ]
    served, unknown, emb_scores = _identify_engine_slots(E, pair.token_ids, rel, train_spec)
    matrix = _slot_matrix(rel, cos, train_spec)
    findings: list[Finding] = []
    if unknown:
        findings.append(_unmatched_slots_finding(unknown, n, rel, emb_scores))
    serving = _identified_serving(engine, version, family, num_layers, f"{engine_path} ({ed.format})", served, train_spec)
    if not unknown:
        findings = diagnose_specs(tuple(train_spec), train_source, serving) + findings
    slots = _slot_stats(E, T, pair, train_spec, served)
    same = [served[i] is not None and served[i] == train_spec[i] for i in range(len(slots))]
    findings += numeric_findings(slots, None, same)
    info = _dump_info(engine_path, ed, pair, served, emb_scores)
    return CompareResult(
        target="(not loaded: dump vs dump)",
        num_layers=num_layers,
        draft=None,
        serving=serving,
        train_spec=tuple(train_spec),
        train_source=f"dump {train_dump} ({train_source})",
        findings=findings,
        slots=slots,
        matrix=matrix,
        dump=info,
        n_sequences=pair.n_seqs,
        n_tokens=int(pair.token_ids.numel()),
        notes=notes,
    )


def _load_pair(
    engine_path: str, train_dump: str, n: int, train_source: str, limit: int | None, max_tokens: int | None
) -> tuple[EngineDump, DumpPair, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Both dumps, paired by tokens and cut into their n slots: (engine dump, pair, training slots, engine slots)."""
    from ..io.train_dumps import load_dump

    ed = load_engine_dump(engine_path)
    train = load_dump(train_dump, limit=limit, max_tokens=max_tokens)
    H = _slot_width(train[0].aux.shape[1], n, ed.hidden_size, train_source)
    pair = pair_dumps(ed, train)
    return ed, pair, pair.train.split(H, dim=-1), pair.engine.split(H, dim=-1)


def _identified_serving(
    engine: str, version: str, family: str, num_layers: int, dump: str, served: Sequence[Any], train_spec: Any
) -> Any:
    """The engine's feed as the dump shows it; an unidentified slot (SRV010 reports it) keeps the
    training slot's place so the spec stays one entry per slot."""
    from ..engines.serving import Serving

    spec = tuple(p if p is not None else train_spec[j] for j, p in enumerate(served))
    source = f"engine dump {dump}: slots identified numerically as " + ", ".join(str(p) if p is not None else "?" for p in served)
    return Serving(engine, version, family, num_layers, spec, None, source)


def _slot_distances(E: Sequence[torch.Tensor], T: Sequence[torch.Tensor], n: int) -> tuple[list[list[float]], list[list[float]]]:
    """(rel L2, cosine) of every engine slot j against each of the n training slots, means over positions."""
    from .compare.numeric import position_metrics

    rel = [[float(position_metrics(E[j], T[i])["rel"].mean()) for i in range(n)] for j in range(len(E))]
    cos = [[float(position_metrics(E[j], T[i])["cos"].mean()) for i in range(n)] for j in range(len(E))]
    return rel, cos


def _unmatched_slots_finding(unknown: list[int], n: int, rel: list[list[float]], emb_scores: dict[int, Any]) -> Any:
    """SRV010: engine slots that are neither a training slot nor the embeddings can only be named with the target."""
    from ..core.findings import Finding

    return Finding(
        "SRV010",
        f"engine dump slot(s) {unknown} match no training slot and are not the embeddings",
        [
            f"engine slot {j}: closest train slot {min(range(n), key=lambda k: rel[j][k])} at rel L2 "
            f"{min(rel[j]):.3f}; repeated-token spread {emb_scores.get(j)}"
            for j in unknown
        ],
        "the engine captures other layers (or another model/revision) than the training dump: load the target "
        "(compare-hidden --target ... --matrix) to name them",
    )


def _dump_info(engine_path: str, ed: Any, pair: Any, served: Sequence[Any], emb_scores: dict[int, Any]) -> dict[str, Any]:
    return {
        "engine_dump": engine_path,
        "format": ed.format,
        "sequences": pair.n_seqs,
        "positions": int(pair.token_ids.numel()),
        "served_spec": [str(p) if p is not None else None for p in served],
        "embed_spread": emb_scores,
    }


def _slot_width(width: int, n: int, engine_hidden: int | None, train_source: str) -> int:
    """The hidden size both dumps share: the training dump's width over its declared slots."""
    if width % n:
        raise BadInput(
            f"the training dump's width {width} is not {n} slots of equal size (as {train_source} declares)",
            "pass the draft (or --train-recipe) the dump was made for",
        )
    H = width // n
    if engine_hidden is not None and engine_hidden != H:
        raise BadInput(
            f"the engine dump's hidden size {engine_hidden} differs from the training dump's {H}",
            "compare dumps of the same target",
        )
    return H


def _identify_engine_slots(
    E: Sequence[torch.Tensor], token_ids: torch.Tensor, rel: list[list[float]], train_spec: Any
) -> tuple[list[Any], list[int], dict[int, Any]]:
    """Each engine slot as the training slot it matches, or the embeddings, or None (unknown)."""
    from ..core.taps import embed

    n = len(train_spec)
    served: list[Any] = []
    unknown: list[int] = []
    emb_scores = {}
    for j in range(len(E)):
        i = min(range(n), key=lambda k: rel[j][k])
        if rel[j][i] <= SAME_REL:
            served.append(train_spec[i])
            continue
        e = embed_like(E[j], token_ids)
        emb_scores[j] = e
        if e is not None and e < 1e-3:
            served.append(embed())
        else:
            served.append(None)
            unknown.append(j)
    return served, unknown, emb_scores


def _slot_matrix(rel: list[list[float]], cos: list[list[float]], train_spec: Any) -> Matrix:
    """Engine slots x training slots, with each engine slot's best match and its margin over the runner-up."""
    from .compare.numeric import Matrix

    rows = [f"engine slot {j}" for j in range(len(rel))]
    cols = [f"train {i}: {p}" for i, p in enumerate(train_spec)]
    return Matrix.of(rows, cols, rel, cos, names=[f"train slot {i} ({p})" for i, p in enumerate(train_spec)])


def _slot_stats(E: Sequence[torch.Tensor], T: Sequence[torch.Tensor], pair: Any, train_spec: Any, served: list[Any]) -> list[Any]:
    """Per-slot similarity, sequence by sequence (the worst positions name their tokens)."""
    from .compare.numeric import SlotAccumulator

    slots = []
    for i in range(min(len(train_spec), len(E))):
        acc = SlotAccumulator(i, train_spec[i], served[i])
        for s in range(pair.n_seqs):
            sel = pair.seq == s
            if bool(sel.any()):
                acc.add(
                    E[i][sel][None],
                    T[i][sel][None],
                    [s],
                    pair.token_ids[sel][None],
                    torch.ones(1, int(sel.sum()), dtype=torch.bool),
                )
        slots.append(acc.finish())
    return slots
