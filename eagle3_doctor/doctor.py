"""Library entry points behind every command: load, resolve both feature paths, run, return data.

The CLI adds nothing but parsing and rendering; everything here is usable from Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .compare import (
    MATCH_REL, CompareResult, MatrixAccumulator, SlotAccumulator, diagnose_specs, numeric_findings,
)
from .draft.formats import DraftInfo, read_draft, spec_from_info
from .draft.model import Eagle3Draft
from .engines import Serving, arch_family, resolve_serving, training_spec
from .errors import BadInput, ResourceError
from .features import DumpSequence, load_dump
from .findings import Finding
from .prompts import Prompt, load_prompts
from .target import Target, batches, capture, greedy_continue, head_chunks, load_target, make_batch, target_argmax
from .taps import CapturePoint, FeatureSpec, all_points, final_norm, format_spec

Progress = Callable[[str, int, int], None]


def _no_progress(_label: str, _done: int, _total: int) -> None:
    pass


@dataclass
class Setup:
    target: Target
    draft: Eagle3Draft | None
    info: DraftInfo | None
    serving: Serving
    train_spec: FeatureSpec | None
    train_source: str
    family: str
    notes: list[str] = field(default_factory=list)
    compiled: bool = False  # the draft's step pieces run under torch.compile (--compile)

    def compile_draft(self, **options: Any) -> None:
        """torch.compile the draft's step pieces in place (``--compile``); results stay identical to eager.

        Worth it on a GPU (acceptance 1.40x -> 1.34x a bare forward, bench/RESULTS.md); on a CPU
        the compilation costs about a minute and saves nothing, so it is said and skipped.
        """
        if self.draft is None or self.compiled:
            return
        if next(self.draft.parameters()).device.type != "cuda" and not options:
            self.notes.append("--compile skipped: the draft runs on the CPU, where compiling costs more than it saves")
            return
        from .draft.fast import compile_draft

        compile_draft(self.draft, **options)
        self.compiled = True

    def draft_summary(self) -> dict[str, Any] | None:
        if self.info is None:
            return None
        i = self.info
        return {"path": i.path, "format": i.format, "format_reason": i.format_reason, "layer_ids": i.layer_ids,
                "layer_ids_key": i.layer_ids_key, "other_layer_id_keys": i.other_layer_id_keys, "dtype": i.weight_dtype}


@torch.inference_mode()
def _check_finite_target(tgt: Target) -> None:
    """NaN/Inf in target weights poison every comparison silently: refuse them up front."""
    for name, p in tgt.model.named_parameters():
        if p.device.type != "meta" and p.is_floating_point() and not bool(torch.isfinite(p).all()):
            raise BadInput(f"target weight {name} in {tgt.name} holds NaN or Inf",
                           "re-download the checkpoint (or load it in a wider --dtype if it overflowed on conversion)")


def parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.replace("[", "").replace("]", "").replace(" ", "").split(",") if x]
    except ValueError:
        raise BadInput(f"--layer-ids {text!r} is not a comma-separated list of integers", "write e.g. --layer-ids 1,3,4") from None


def load_setup(
    *,
    target: str,
    draft: str | None,
    draft_format: str | None = None,
    engine: str = "sglang",
    engine_version: str | None = None,
    layer_ids: str | None = None,
    train_recipe: str | None = None,
    dtype: str = "auto",
    device: str = "auto",
    trust_remote_code: bool = False,
    device_map: str | dict | None = None,
    max_memory: dict | None = None,
) -> Setup:
    tgt = load_target(target, dtype=dtype, device=device, trust_remote_code=trust_remote_code, device_map=device_map,
                      max_memory=max_memory)
    _check_finite_target(tgt)
    L = tgt.num_layers
    family = arch_family(tgt.config)
    d, info = None, None
    notes: list[str] = []
    if draft is not None:
        draft_device = str(tgt.capture_device or tgt.device)
        d, info = read_draft(draft, fmt=draft_format, device=draft_device, dtype=tgt.dtype, target_embed=tgt.embed_weight())
        if info.weight_dtype and info.weight_dtype != str(tgt.dtype).replace("torch.", ""):
            notes.append(f"draft weights are {info.weight_dtype}, target runs in {str(tgt.dtype).replace('torch.', '')}: "
                         "the draft is run in the target's dtype here (see inspect CFG005)")
        from .draft.formats import is_finite_state

        bad = is_finite_state(d)
        if bad:
            raise BadInput(f"draft weights in {draft} hold NaN or Inf ({', '.join(bad[:3])})",
                           "re-export the draft from a healthy training checkpoint")
        fc_in = d.config.fc_in_features
        hidden = tgt.hidden_size
        if fc_in % hidden:
            raise BadInput(
                f"the draft's fc takes {fc_in} inputs, not a multiple of the target hidden size {hidden}",
                "this draft belongs to another target; pass the target it was trained for",
            )
    config_ids = {}
    if info is not None:
        if info.layer_ids_key:
            config_ids[info.layer_ids_key] = info.layer_ids
        config_ids.update(info.other_layer_id_keys)
    serving = resolve_serving(engine, engine_version, family, L, config_ids, parse_ids(layer_ids))
    for p in serving.spec:
        p.check_range(L)
    if train_recipe:
        tspec, tsrc = training_spec(train_recipe, L)
    elif info is not None:
        tspec, tsrc = spec_from_info(info, L, family)
    else:
        tspec, tsrc = None, "unknown (pass --train-recipe, --train-dump or --draft)"
    if tspec is not None:
        for p in tspec:
            p.check_range(L)
    return Setup(tgt, d, info, serving, tspec, tsrc, family, notes)


# --------------------------------------------------------------------------- sequences


@dataclass
class Sources:
    """What gets replayed: prompts (from a file, ids or the defaults) or a training dump's sequences."""

    prompts: list[Prompt]
    dump: list[DumpSequence] | None
    notes: list[str]


def _sources(setup: Setup, prompts_path: str | None, train_dump: str | None, max_tokens: int | None,
             limit: int | None, prompt_ids: Sequence[Sequence[int]] | None) -> Sources:
    tgt = setup.target
    if train_dump:
        H = tgt.hidden_size
        dump = load_dump(train_dump, vocab_size=tgt.vocab_size, hidden_size=H, limit=limit, max_tokens=max_tokens)
        return Sources([], dump, [])
    prompts, notes = _prompts(tgt, prompts_path, max_tokens, limit, prompt_ids)
    return Sources(prompts, None, notes)


def prompt_sequences(target: Target, prompts_path: str | None, max_tokens: int | None, limit: int | None = None) -> tuple[list[Prompt], list[str]]:
    prompts = load_prompts(target.tokenizer, prompts_path, max_tokens=max_tokens, max_positions=target.max_positions, limit=limit)
    notes = []
    cut = [p for p in prompts if p.truncated_from]
    if cut:
        notes.append(f"{len(cut)} prompt(s) truncated to --max-tokens {max_tokens} (longest had {max(p.truncated_from for p in cut)} tokens)")
    return prompts, notes


def _prompts(target: Target, prompts_path: str | None, max_tokens: int | None, limit: int | None,
             prompt_ids: Sequence[Sequence[int]] | None) -> tuple[list[Prompt], list[str]]:
    if prompt_ids is None:
        return prompt_sequences(target, prompts_path, max_tokens, limit)
    ids = [list(p) for p in prompt_ids][:limit] if limit else [list(p) for p in prompt_ids]
    if not ids or not all(ids):
        raise BadInput("prompt_ids must be non-empty token lists", "pass at least one token per prompt")
    return [Prompt("", p[:max_tokens] if max_tokens else p, None) for p in ids], []


def _check_seq_len(target: Target, n: int) -> None:
    mp = target.max_positions
    if mp and n > mp:
        raise BadInput(f"a sequence of {n} tokens exceeds the target's {mp} positions", f"pass --max-tokens {mp} or fewer new tokens")


# --------------------------------------------------------------------------- compare-hidden


@torch.inference_mode()
def compare_hidden(
    setup: Setup,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    max_tokens: int | None = 512,
    batch_size: int = 8,
    matrix: bool = False,
    limit: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> CompareResult:
    """prompt_ids: token sequences to replay as they are (library use; overrides prompts_path)."""
    tgt, serving = setup.target, setup.serving
    L = tgt.num_layers
    H = tgt.hidden_size
    if not train_dump and setup.train_spec is None:
        raise BadInput("no training side: nothing to compare against", "pass --train-recipe, --train-dump or --draft")
    src = _sources(setup, prompts_path, train_dump, max_tokens, limit, prompt_ids)
    notes, dump = list(setup.notes) + src.notes, src.dump
    seqs = [p.ids for p in src.prompts] if dump is None else [d.input_ids.tolist() for d in dump]
    n_slots = dump[0].aux.shape[1] // H if dump is not None else len(setup.train_spec)  # type: ignore[arg-type]
    for s in seqs:
        _check_seq_len(tgt, len(s))
    pts = set(serving.spec)
    need_all = matrix or dump is not None
    if need_all:
        pts |= set(all_points(L))
    elif setup.train_spec is not None:
        pts |= set(setup.train_spec)

    serve_rows = [f"serve slot {i} ({p})" for i, p in enumerate(serving.spec)]
    train_rows = [f"train slot {j}" for j in range(n_slots)] if dump is not None else []
    mat = MatrixAccumulator(train_rows + (serve_rows if matrix else []), all_points(L)) if need_all else None
    hs_mat = MatrixAccumulator(["dump hidden_state"], all_points(L)) if dump is not None else None
    slot_acc: list[SlotAccumulator] = []
    pad = tgt.tokenizer.pad_token_id if tgt.tokenizer.pad_token_id is not None else 0
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))  # similar lengths share a batch
    done = 0
    train_tensors_spec: FeatureSpec | None = setup.train_spec if dump is None else None
    for _, idx in batches(order, batch_size):
        batch = make_batch([seqs[i] for i in idx], pad, tgt.device)
        got, _ = capture(tgt, batch, pts)
        mask = batch.attention_mask.bool()
        if dump is not None:
            T = batch.input_ids.shape[1]
            aux = torch.zeros(len(idx), T, n_slots * H, dtype=torch.float32, device=tgt.device)
            hs = torch.zeros(len(idx), T, H, dtype=torch.float32, device=tgt.device)
            has_hs = all(dump[i].hidden_state is not None for i in idx)
            for b, i in enumerate(idx):
                n = dump[i].input_ids.numel()
                aux[b, :n] = dump[i].aux.to(tgt.device, torch.float32)
                if has_hs:
                    hs[b, :n] = dump[i].hidden_state.to(tgt.device, torch.float32)  # type: ignore[union-attr]
            train_slots = list(aux.split(H, dim=-1))
            if has_hs:
                hs_mat.add([hs], got, mask)  # type: ignore[union-attr]
        else:
            train_slots = [got[p] for p in setup.train_spec]  # type: ignore[union-attr]
        if mat is not None:
            rows = list(train_slots) if dump is not None else []
            if matrix:
                rows += [got[p] for p in serving.spec]
            mat.add(rows, got, mask)
        if not slot_acc:
            for i in range(max(len(serving.spec), len(train_slots))):
                if i < len(serving.spec) and i < len(train_slots):
                    tname = str(train_tensors_spec[i]) if train_tensors_spec else f"dump slot {i}"
                    slot_acc.append(SlotAccumulator(i, tname, str(serving.spec[i])))
        for acc in slot_acc:
            acc.add(got[serving.spec[acc.slot]], train_slots[acc.slot], list(idx), batch.input_ids, mask)
        done += len(idx)
        progress("compare-hidden", done, len(seqs))

    matrix_res = mat.result() if mat is not None else None
    dump_info = None
    findings: list[Finding] = []
    if dump is not None:
        # What the dump holds, recovered numerically: each slot's best-matching capture point.
        inferred = []
        unmatched = []
        for j in range(n_slots):
            b = matrix_res["best"][j]  # type: ignore[index]
            inferred.append(next(p for p in all_points(L) if str(p) == b["best"]))
            if b["rel_l2"] > MATCH_REL:
                unmatched.append(j)
        train_spec = tuple(inferred)
        train_source = f"dump {train_dump}: slots identified numerically as {format_spec(train_spec)}"
        dump_info = {"path": train_dump, "files": len(dump), "slots": n_slots, "inferred_spec": [str(p) for p in train_spec],
                     "best": matrix_res["best"][:n_slots]}  # type: ignore[index]
        if unmatched:
            findings.append(Finding(
                "NUM004", f"dump slot(s) {unmatched} match no capture point of this target",
                [f"slot {j}: best {matrix_res['best'][j]['best']} at rel L2 {matrix_res['best'][j]['rel_l2']:.3f}" for j in unmatched],  # type: ignore[index]
                "the dump was made with another model, revision or tokenizer; pass that target",
            ))
        if hs_mat is not None and hs_mat.n:
            hb = hs_mat.result()
            rel = hb["rel_l2"][0]
            jn = hb["cols"].index(str(final_norm()))
            best = hb["best"][0]
            dump_info["hidden_state"] = {"rel_l2_to_final_norm": rel[jn], "best": best["best"], "best_rel_l2": best["rel_l2"]}
            if rel[jn] > 0.05:
                findings.append(Finding(
                    "NUM003", f"the dump's hidden_state is not final_norm (rel L2 {rel[jn]:.3f}); it best matches {best['best']}",
                    [f"rel L2 to final_norm {rel[jn]:.4f}; to {best['best']} {best['rel_l2']:.4f}"],
                    "SpecForge trains against target logits computed from hidden_state: re-dump it after the final norm",
                ))
        if setup.info is not None:
            declared, where = spec_from_info(setup.info, L, setup.family)
            if tuple(declared) != train_spec:
                notes.append(f"the draft config declares {format_spec(declared)} ({where}) but the dump holds {format_spec(train_spec)}")
    else:
        train_spec, train_source = setup.train_spec, setup.train_source  # type: ignore[assignment]
    findings = diagnose_specs(train_spec, train_source, serving) + findings
    slots = [a.finish(tgt.tokenizer) for a in slot_acc]
    same = [i < len(train_spec) and i < len(serving.spec) and train_spec[i] == serving.spec[i] for i in range(len(slots))]
    findings += numeric_findings(slots, matrix_res if dump is not None else None, same)
    return CompareResult(
        target=tgt.name, num_layers=L, draft=setup.draft_summary(), serving=serving, train_spec=train_spec,
        train_source=train_source, findings=findings, slots=slots, matrix=matrix_res, dump=dump_info,
        n_sequences=len(seqs), n_tokens=sum(len(s) for s in seqs), notes=notes,
    )


# --------------------------------------------------------------------------- acceptance


@dataclass
class AcceptanceRun:
    paths: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    findings: list[Finding]
    notes: list[str]
    reference: dict[str, Any] | None = None
    scan: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        from .acceptance import SCHEMA

        return {"schema": SCHEMA, "settings": self.settings, "paths": self.paths,
                "findings": [f.to_dict() for f in self.findings], "reference": self.reference,
                "scan": self.scan, "notes": self.notes}


def _target_step_fn(tgt: Target, spec: FeatureSpec):
    def step(tokens: list[int]):
        batch = make_batch([tokens], 0, tgt.device)
        got, last = capture(tgt, batch, spec, want_logits=True)
        aux = torch.cat([got[p] for p in spec], dim=-1)
        return aux, target_argmax(tgt, last)[0]
    return step


def scan_candidates(spec: FeatureSpec, num_layers: int) -> list[FeatureSpec]:
    """Each slot +-1 layer, embed in front, final_norm at the back: the plausible wirings."""
    from .taps import embed, layer_out

    def around(p: CapturePoint, slot: int) -> list[CapturePoint]:
        opts = [p]
        if p.kind == "layer_out":
            opts += [layer_out(i) for i in (p.layer - 1, p.layer + 1) if 0 <= i < num_layers]  # type: ignore[operator]
        if slot == 0:
            opts.append(embed())
        if slot == len(spec) - 1:
            opts.append(final_norm())
        return list(dict.fromkeys(opts))

    import itertools

    # duplicates are dropped: no training recipe feeds one capture point twice
    cands = [tuple(c) for c in itertools.product(*(around(p, i) for i, p in enumerate(spec))) if len(set(c)) == len(c)]
    shift = (embed(),) + tuple(spec[:-1])  # the seed-style slot shift
    if shift not in cands:
        cands.append(shift)
    return cands


@torch.inference_mode()
def acceptance(
    setup: Setup,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    num_steps: int = 7,
    continuation: str = "greedy",
    max_new_tokens: int = 128,
    max_tokens: int | None = 512,
    batch_size: int = 8,
    temperature: float = 0.0,
    temp_mode: str = "sampled",
    topk: int = 1,
    num_draft_tokens: int | None = None,
    token_tree: Sequence[Sequence[int]] | None = None,
    reference: bool = False,
    scan: bool = False,
    limit: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> AcceptanceRun:
    """prompt_ids: prompts as token ids (library use; overrides prompts_path)."""
    from .acceptance import PathAccumulator, reference_loop, unroll_outcomes

    tgt, draft, serving = setup.target, setup.draft, setup.serving
    if draft is None:
        raise BadInput("acceptance needs a draft", "pass --draft DIR")
    if continuation not in ("greedy", "text"):
        raise BadInput(f"unknown --continuation {continuation!r}", "use greedy or text")
    if num_steps < 1:
        raise BadInput("--num-steps must be at least 1", "use e.g. --num-steps 7")
    L = tgt.num_layers
    H = tgt.hidden_size
    tree = _tree_plan(serving.engine, num_steps, topk, num_draft_tokens, token_tree)
    if tree is not None and tree["kind"] == "static":
        num_steps = tree["depth"]
    src = _sources(setup, prompts_path, train_dump, max_tokens, limit, prompt_ids)
    notes, dump, prompts = list(setup.notes) + src.notes, src.dump, src.prompts
    if dump is not None:
        seqs = [d.input_ids.tolist() for d in dump]
        starts = [0] * len(seqs)
        if continuation == "greedy":
            notes.append("a training dump fixes the text: acceptance is measured along it (--continuation text)")
            continuation = "text"
    else:
        seqs = [p.ids for p in prompts]
        if continuation == "greedy":
            for p in seqs:
                _check_seq_len(tgt, len(p) + max_new_tokens)
            try:
                seqs = greedy_continue(tgt, seqs, max_new_tokens, batch_size,
                                       progress=lambda d, n: progress("greedy continuation (tokens x batches)", d, n))
            except torch.cuda.OutOfMemoryError:
                raise ResourceError("CUDA out of memory while generating continuations",
                                    f"retry with --batch-size {max(1, batch_size // 2)}") from None
            starts = [len(p.ids) - 1 for p in prompts]
        else:
            starts = [0] * len(seqs)
    for s in seqs:
        _check_seq_len(tgt, len(s))
    paths: dict[str, FeatureSpec | None] = {"serving": serving.spec}
    if serving.failure is not None:
        notes.append(f"{serving.label} fails at {serving.failure.when}: {serving.failure.message}")
    if dump is not None:
        paths["training"] = None  # the dump's own tensors
    elif setup.train_spec is not None and setup.train_spec != serving.spec:
        paths["training"] = setup.train_spec
    elif setup.train_spec is not None:
        notes.append("training and serving feature paths are the same capture points: one path measured")
    n_aux = draft.config.num_aux_states
    for name, spec in paths.items():
        if spec is not None and len(spec) != n_aux:
            notes.append(f"{name} path feeds {len(spec)} slot(s) but the draft's fc takes {n_aux}: not measurable")
    measurable = {n: s for n, s in paths.items() if s is None or len(s) == n_aux}
    # issue 13: the serving features also through the draft as the engine runs it (draft/as_served.py)
    from .draft.as_served import measured_findings, served_paths

    served = served_paths(setup)
    drafts = dict.fromkeys(measurable, draft)
    if "serving" in measurable:
        for n, d in served.drafts.items():
            measurable[n], drafts[n] = serving.spec, d
    cands = scan_candidates(setup.train_spec or serving.spec, L) if scan else []
    pts: set[CapturePoint] = {p for s in measurable.values() if s for p in s} | {p for c in cands for p in c}
    accs = {n: PathAccumulator(n, num_steps) for n in measurable}
    scan_hits = {c: [0, 0] for c in cands}
    pad = tgt.tokenizer.pad_token_id if tgt.tokenizer.pad_token_id is not None else 0
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    done = 0
    for _, idx in batches(order, batch_size):
        batch = make_batch([seqs[i] for i in idx], pad, tgt.device)
        got, last = capture(tgt, batch, pts, want_logits=True)
        amax = target_argmax(tgt, last)
        tokens = batch.input_ids
        lens = batch.lengths
        st = [starts[i] for i in idx]

        def labels(k: int) -> torch.Tensor:
            if continuation == "greedy":
                return torch.roll(tokens, -(1 + k), dims=1)  # x_{t+1+k}: the target's own greedy tokens
            return torch.roll(amax, -k, dims=1)  # a_{t+k}: the target's choice along the given text

        tl = None
        if temperature > 0:
            full = torch.empty(*last.shape[:-1], tgt.vocab_size, dtype=torch.float32, device=last.device)
            flat = full.view(-1, tgt.vocab_size)
            for sl, lg in head_chunks(tgt, last):
                flat[sl] = lg

            def tl(k: int, full=full) -> torch.Tensor:
                return torch.roll(full, -k, dims=1)

        for name, spec in measurable.items():
            if spec is None:
                T = tokens.shape[1]
                aux = torch.zeros(len(idx), T, n_aux * H, dtype=tgt.dtype, device=tgt.device)
                for b, i in enumerate(idx):
                    aux[b, : dump[i].aux.shape[0]] = dump[i].aux.to(tgt.device, tgt.dtype)  # type: ignore[index]
            else:
                aux = torch.cat([got[p] for p in spec], dim=-1)
            out = unroll_outcomes(drafts[name], aux, tokens, labels, lens, num_steps, topk=1 if tree else topk,
                                  temperature=temperature, target_logits=tl, temp_mode=temp_mode,
                                  rank_width=tree["width"] if tree and tree["kind"] == "static" else 0)
            if tree is not None:
                out.tree_accepted = _tree_accepted(tree, drafts[name], aux, tokens, labels, lens, num_steps, out)
            accs[name].add(out, st, lens, walk=continuation == "greedy")
        for c in cands:
            aux = torch.cat([got[p] for p in c], dim=-1)
            out = unroll_outcomes(draft, aux, tokens, labels, lens, 1)
            region = torch.stack([torch.arange(tokens.shape[1], device=tokens.device) >= s for s in st])
            scan_hits[c][0] += int((out.match[:, 0] & region).sum())
            scan_hits[c][1] += int((out.valid[:, 0] & region).sum())
        done += len(idx)
        progress("acceptance", done, len(seqs))

    results = {n: a.result() for n, a in accs.items()}
    for n, spec in measurable.items():
        results[n]["spec"] = [str(p) for p in spec] if spec is not None else "dump"
    for res in results.values():  # batches ran longest first: report per prompt, in prompt order
        by_prompt: list[Any] = [None] * len(seqs)
        for j, i in enumerate(order):
            by_prompt[i] = res["accepted_lengths"][j]
        res["accepted_lengths"] = by_prompt
        add_intervals(res, order, num_steps)
        if "accepted_lengths" in res.get("tree", {}):
            tree_by: list[Any] = [None] * len(seqs)
            for j, i in enumerate(order):
                tree_by[i] = res["tree"]["accepted_lengths"][j]
            res["tree"]["accepted_lengths"] = tree_by
        if "step1_counts" in res:
            s1: list[Any] = [None] * len(seqs)
            for j, i in enumerate(order):
                s1[i] = res["step1_counts"][j]
            res["step1_counts"] = s1
    ref = None
    if reference:
        if continuation != "greedy":
            raise BadInput("--reference-loop needs --continuation greedy", "drop --continuation text")
        if "serving" not in results:
            raise BadInput("--reference-loop needs a serving path the draft can take", "fix the slot count first (see notes)")
        from .acceptance import metrics_from_passes

        ref_acc, ref_drf, same_tokens, same_each = [], [], True, []
        step = _target_step_fn(tgt, serving.spec)
        for i, p in enumerate(prompts):
            toks, a, d = reference_loop(step, draft, list(p.ids), len(seqs[i]), num_steps)
            same_tokens &= toks == seqs[i]
            same_each.append(toks == seqs[i])
            ref_acc.append(a)
            ref_drf.append(d)
            progress("reference loop", i + 1, len(prompts))
        ref = {
            "accepted_lengths": ref_acc,
            "chain": metrics_from_passes([x for r in ref_acc for x in r], [x for r in ref_drf for x in r], num_steps),
            "agrees_with_estimator": ref_acc == results["serving"]["accepted_lengths"],
            "same_tokens": same_tokens,
            "same_tokens_per_prompt": same_each,  # False: the loop's full-prefix target forwards chose other tokens
        }
        if tree is not None:
            from .tree import sglang_tree_reference_loop, static_tree_reference_loop

            t_acc, t_drf = [], []
            for i, p in enumerate(prompts):
                if tree["kind"] == "sglang":
                    toks, a, d = sglang_tree_reference_loop(step, draft, list(p.ids), len(seqs[i]), num_steps, topk,
                                                            tree["num_draft_tokens"])
                else:
                    toks, a, d = static_tree_reference_loop(step, draft, list(p.ids), len(seqs[i]), tree["paths"])
                same_tokens &= toks == seqs[i]
                t_acc.append(a)
                t_drf.append(d)
                progress("reference tree loop", i + 1, len(prompts))
            ref["tree"] = {
                "accepted_lengths": t_acc,
                "metrics": metrics_from_passes([x for r in t_acc for x in r], [x for r in t_drf for x in r], num_steps),
                "agrees_with_estimator": t_acc == results["serving"].get("tree", {}).get("accepted_lengths"),
            }
            ref["same_tokens"] = same_tokens
            ref["agrees_with_estimator"] = ref["agrees_with_estimator"] and ref["tree"]["agrees_with_estimator"]
    scan_res = None
    if scan:
        scan_res = sorted(
            ({"spec": [str(p) for p in c], "step1_acc": h / n if n else float("nan"), "n": n} for c, (h, n) in scan_hits.items()),
            key=lambda r: -r["step1_acc"],
        )
    settings = {
        "target": tgt.name, "draft": setup.draft_summary(), "engine": serving.label, "num_steps": num_steps,
        "continuation": continuation, "max_new_tokens": max_new_tokens if continuation == "greedy" else None,
        "temperature": temperature, "temperature_mode": temp_mode if temperature > 0 else None, "topk": topk,
        "num_draft_tokens": num_draft_tokens, "dtype": str(tgt.dtype).replace("torch.", ""), "device": str(tgt.device),
        "compiled": setup.compiled, "sequences": len(seqs), "tokens": sum(len(s) for s in seqs),
        "serving_spec": [str(p) for p in serving.spec], "serving_source": serving.source,
        "training_spec": [str(p) for p in setup.train_spec] if setup.train_spec else None,
        "training_source": setup.train_source if dump is None else f"dump {train_dump}",
    }
    if tree is not None:
        settings["tree"] = {k: v for k, v in tree.items() if k != "paths" or tree["kind"] == "static"}
        settings["tree_note"] = tree["label"]
    findings = acceptance_findings(results, scan_res, setup) + measured_findings(served, results, num_steps)
    from .acceptance import triage

    for name, res in results.items():
        res["triage"] = triage(res, settings["dtype"])
    return AcceptanceRun(results, settings, findings, notes, ref, scan_res)


def add_intervals(res: dict[str, Any], order: Sequence[int], num_steps: int) -> None:
    """Per-request acc_k counts into prompt order, then bootstrap intervals over prompts (issue 14)."""
    from .stats import acceptance_counts, acceptance_intervals

    by_prompt: list[Any] = [None] * len(order)
    for j, i in enumerate(order):
        by_prompt[i] = res["acc_k_by_request"][j]
    res["acc_k_by_request"] = by_prompt
    counts = acceptance_counts(res["accepted_lengths"], [r["hits"] for r in by_prompt],
                               [r["positions"] for r in by_prompt], num_steps)
    res["intervals"] = acceptance_intervals(counts, num_steps)


def _tree_plan(engine: str, num_steps: int, topk: int, num_draft_tokens: int | None,
               token_tree: Sequence[Sequence[int]] | None) -> dict[str, Any] | None:
    """Which tree the engine builds for these settings (exact acceptance for it: tree.py)."""
    from .tree import check_tree_settings, full_candidates

    if token_tree:
        paths = [list(p) for p in token_tree]
        depth, width = max(len(p) for p in paths), max(p[-1] for p in paths) + 1
        return {"kind": "static", "paths": paths, "depth": depth, "width": width, "num_draft_tokens": len(paths) + 1,
                "label": f"exact greedy acceptance of the vLLM speculative_token_tree ({len(paths)} nodes, depth {depth})"}
    if topk <= 1:
        return None
    if engine == "vllm":
        import itertools

        paths = [list(p) for d in range(1, num_steps + 1) for p in itertools.product(range(topk), repeat=d)]
        if len(paths) > 20000:
            from .errors import BadInput

            raise BadInput(f"a full top-{topk} tree of depth {num_steps} has {len(paths)} nodes",
                           "pass the server's speculative_token_tree (--serve-cmd) or a smaller --topk/--num-steps")
        return {"kind": "static", "paths": paths, "depth": num_steps, "width": topk, "num_draft_tokens": len(paths) + 1,
                "label": f"exact greedy acceptance of a full top-{topk} static tree of depth {num_steps} ({len(paths)} nodes)"}
    ndt = num_draft_tokens if num_draft_tokens is not None else full_candidates(topk, num_steps) + 1
    check_tree_settings(topk, num_steps, ndt)
    label = (f"exact greedy acceptance of SGLang's tree: topk {topk}, {num_steps} steps, {ndt} draft tokens "
             f"(best {ndt - 1} of {full_candidates(topk, num_steps)} scored candidates)")
    if num_draft_tokens is None:
        label += "; --num-draft-tokens not given: every candidate kept"
    return {"kind": "sglang", "topk": topk, "depth": num_steps, "num_draft_tokens": ndt, "label": label}


def _tree_accepted(tree: dict[str, Any], draft: Eagle3Draft, aux: torch.Tensor, tokens: torch.Tensor, labels,
                   lens: Sequence[int], num_steps: int, out: Any) -> torch.Tensor:
    from .tree import sglang_tree_accepted, static_tree_accepted

    if tree["kind"] == "sglang":
        acc, _ = sglang_tree_accepted(draft, aux, tokens, labels, lens, num_steps, tree["topk"], tree["num_draft_tokens"])
        return acc
    return static_tree_accepted(out.ranks, out.valid, tree["paths"])


def _acc_fix(setup: Setup) -> str:
    from .compare import fix_for

    if setup.train_spec is None:
        return "run eagle3-doctor compare-hidden for the exact layer ids to write"
    text, _ = fix_for(setup.serving, setup.train_spec)
    return text or f"{setup.serving.label} cannot feed what was trained: see eagle3-doctor compare-hidden"


def acceptance_findings(results: dict[str, dict[str, Any]], scan_res: list[dict[str, Any]] | None, setup: Setup) -> list[Finding]:
    out: list[Finding] = []
    s, t = results.get("serving"), results.get("training")
    if s and t and s["acc_k"] and t["acc_k"]:
        ds, dt = s["acc_k"][0], t["acc_k"][0]
        ls, lt = s["chain"].get("mean_acceptance_length", float("nan")), t["chain"].get("mean_acceptance_length", float("nan"))
        if dt - ds > 0.05:
            out.append(Finding(
                "ACC001",
                f"the serving features cost {100 * (dt - ds):.1f} points of step-1 accuracy "
                f"({ds:.3f} served vs {dt:.3f} trained)",
                [f"step-1 accuracy: serving {ds:.3f}, training {dt:.3f}",
                 f"mean acceptance length: serving {ls:.2f}, training {lt:.2f}",
                 f"serving feeds {', '.join(s['spec']) if isinstance(s['spec'], list) else s['spec']}; "
                 f"trained on {', '.join(t['spec']) if isinstance(t['spec'], list) else t['spec']}"],
                _acc_fix(setup),
            ))
    ref = t or s
    if ref and ref["acc_k"] and ref["acc_k"][0] < 0.3:
        out.append(Finding(
            "ACC002", f"step-1 accuracy is {ref['acc_k'][0]:.3f} even on the {ref['name']} features",
            [f"acc_k: {', '.join(f'{a:.3f}' for a in ref['acc_k'])}"],
            "check the draft itself: lm_head, d2t/t2d, embeddings, chat template and that it was trained for this target",
        ))
    if scan_res:
        best = scan_res[0]
        cur = setup.train_spec or setup.serving.spec
        cur_row = next((r for r in scan_res if r["spec"] == [str(p) for p in cur]), None)
        if cur_row and best["spec"] != cur_row["spec"] and best["step1_acc"] - cur_row["step1_acc"] > 0.01:
            out.append(Finding(
                "ACC004", f"{', '.join(best['spec'])} fits the draft better than {', '.join(cur_row['spec'])}",
                [f"step-1 accuracy {best['step1_acc']:.3f} vs {cur_row['step1_acc']:.3f}"],
                "the draft was probably trained on those capture points: set the training recipe accordingly "
                "and re-run compare-hidden",
            ))
    return out
