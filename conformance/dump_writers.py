"""Engine dumps written by the engines' own writer code, executed from the release source (never re-typed here).

The doctor reads two engines' captures of the draft's input states; the files its tests read must be the files
those engines write, so the writers are lifted out of the release source with ``ast`` and run on CPU tensors:

- SGLang 0.5.23 ``srt/debug_utils/dumper.py``: the non-intrusive hook's ``_NonIntrusiveDumper._make_forward_pre_hook``
  (registered on real torch modules named as SGLang's draft names them, ``model.fc`` and ``model.embed_tokens``),
  its ``_dump_value``/``_convert_value``, and the dumper's ``_Dumper._dump_single``, ``_format_tags`` and
  ``_torch_save`` (the file name and the ``{"value", "meta"}`` payload). ``_get_rank`` is the one function
  replaced: the rank a process would have under ``torch.distributed``.
- vLLM 0.33.0 ``distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py``: the connector's
  ``request_finished`` (which tokens are saved: ``include_output_tokens``), ``_submit_async_write`` (rank 0 only,
  the slot mapping over the request's blocks, ``extract_from_kv_cache``) and ``_write_tensors`` (``save_file``),
  with CUDA streams and events stubbed and the thread pool run inline. The cache it reads is filled here, block by
  block, as the ``extract_hidden_states`` method's cache-only attention layer fills it on the GPU.

Sources: ``conformance/testdata/<engine>/<version>/`` (as shipped in the wheels; testdata/README.md).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import textwrap
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from stubs import Anything, Obj, compile_function

TESTDATA = Path(__file__).resolve().parent / "testdata"
SGLANG_DUMPER = TESTDATA / "sglang" / "0.5.23" / "sglang" / "srt" / "debug_utils" / "dumper.py"
VLLM_CONNECTOR = (
    TESTDATA
    / "vllm"
    / "0.33.0"
    / "vllm"
    / "distributed"
    / "kv_transfer"
    / "kv_connector"
    / "v1"
    / "example_hidden_states_connector.py"
)


def lift(path: Path, name: str, cls: str | None = None) -> str:
    """The source of function ``name`` (a method of ``cls``), dedented, as the release ships it."""
    tree = ast.parse(path.read_text())
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    src = ast.get_source_segment(path.read_text(), node, padded=True)
    assert src is not None
    return textwrap.dedent(src)


def _fn(path: Path, name: str, cls: str | None = None, **given: Any) -> types.FunctionType:
    return compile_function(lift(path, name, cls), given)


def _class_constant(path: Path, cls: str, name: str) -> Any:
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    assign = next(a for a in node.body if isinstance(a, ast.Assign) and any(getattr(t, "id", None) == name for t in a.targets))
    return ast.literal_eval(assign.value)


# --------------------------------------------------------------------------- SGLang's dumper


class SGLangDumper:
    """One process's dumper (rank ``rank``), its non-intrusive pre-hooks put on modules named as SGLang's draft."""

    def __init__(self, out_dir: Path, rank: int, exp_name: str = "dump_doctor") -> None:
        p = SGLANG_DUMPER
        torch_save = _fn(
            p,
            "_torch_save",
            _clone_if_view=_fn(p, "_clone_if_view", _map_tensor=_fn(p, "_map_tensor", torch=torch)),
            _log=print,
            torch=torch,
        )
        self.state = Obj(dump_index=0, step=0, captured_output_data=None, cleanup_previous_handled=True)
        config = Obj(
            dir=str(out_dir), exp_name=exp_name, include_parallel_rank_in_filename=False,
            enable_output_console=False, enable_output_file=True, cleanup_previous=False,
        )  # fmt: skip
        dumper = Obj(_config=config, _state=self.state, _static_meta={}, _ensure_exp_name=lambda: None)
        single = _fn(p, "_dump_single", "_Dumper", _get_rank=lambda: rank, _format_tags=_fn(p, "_format_tags"),
                     _torch_save=torch_save, Path=Path, torch=torch)  # fmt: skip

        def dump(name: str, value: Any) -> None:  # what _Dumper.dump -> _dump_inner hand _dump_single: the tags
            single(dumper, tag="Dump", tags={"name": name}, value=value, save=True)

        dumper.dump = dump
        convert = _fn(p, "_convert_value", "_NonIntrusiveDumper", torch=torch, _plugins=[])
        prefix = _class_constant(p, "_NonIntrusiveDumper", "_NAME_PREFIX")
        self.hooker = Obj(_dumper=dumper, _mode="all", _core_fields=frozenset(), _convert_value=convert, _NAME_PREFIX=prefix)
        self.hooker._dump_value = types.MethodType(_fn(p, "_dump_value", "_NonIntrusiveDumper"), self.hooker)
        self._pre_hook = types.MethodType(_fn(p, "_make_forward_pre_hook", "_NonIntrusiveDumper"), self.hooker)

    def hook(self, module: torch.nn.Module, module_name: str) -> Any:
        return module.register_forward_pre_hook(self._pre_hook(module_name=module_name, is_root=False), with_kwargs=True)

    def step(self, step: int) -> None:
        self.state.step = step


def write_sglang_dump(
    out_dir: Path, seqs: Sequence[Sequence[int]], aux: Sequence[torch.Tensor], ranks: int = 1, shard: bool = False
) -> None:
    """One extend per sequence through the draft's fc and embed_tokens on every rank, dumped by SGLang's hooks.

    ``seqs[i]`` x_0..x_{T-1}, ``aux[i]`` [T, n*H] its features. The draft extend reads rows 0..T-2 with the ids
    shifted left by one (x_1..x_{T-1}, the last being the token the target chose), as SGLang's draft extend runs.
    ``shard``: rank r holds 1/R of each slot's hidden dim (a capture before the tensor-parallel reduction)."""
    for r in range(ranks):
        d = SGLangDumper(out_dir, r)
        for i, (s, a) in enumerate(zip(seqs, aux)):
            rows = a[: len(s) - 1]
            if shard:
                T, W = rows.shape
                n = 3
                rows = rows.reshape(T, n, -1).chunk(ranks, dim=-1)[r].reshape(T, -1)
            fc = torch.nn.Linear(rows.shape[1], 1, bias=False).to(rows.dtype)
            emb = torch.nn.Embedding(max(s) + 1, 1)
            handles = [d.hook(fc, "model.fc"), d.hook(emb, "model.embed_tokens")]
            d.step(i)
            ids = torch.as_tensor(list(s[1:]), dtype=torch.long)
            emb(ids)
            fc(rows)
            for h in handles:
                h.remove()


# --------------------------------------------------------------------------- vLLM's hidden-states connector


class _Event:
    def record(self, *_a: Any) -> None: ...
    def synchronize(self) -> None: ...
    def query(self) -> bool:
        return True


class _Cuda:
    Event = _Event
    Stream = object

    @staticmethod
    def stream(_s: Any) -> Any:
        return contextlib.nullcontext()


class _TorchOnCpu:
    """torch as the connector uses it, on a CPU: streams and events stand still, pinned memory is plain memory."""

    cuda = _Cuda

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def empty_like(t: torch.Tensor, **kw: Any) -> torch.Tensor:
        kw.pop("pin_memory", None)
        return torch.empty_like(t, **kw)


class _Inline:
    def submit(self, fn: Any, *a: Any) -> Any:
        from concurrent.futures import Future

        f: Future = Future()
        f.set_result(fn(*a))
        return f


def write_vllm_dump(
    out_dir: Path,
    seqs: Sequence[Sequence[int]],
    aux: Sequence[torch.Tensor],
    tp_rank: int = 0,
    block_size: int = 16,
    first_id: int = 0,
) -> list[Path]:
    """Each sequence a request whose prompt + output tokens fill the connector's cache; the connector's own code
    picks the tokens (``include_output_tokens``: all but the last, which was never a forward's input) and writes.
    ``tp_rank`` != 0 runs the same code on a rank that writes nothing (vLLM writes from tensor-parallel rank 0)."""
    p = VLLM_CONNECTOR
    ns: dict[str, Any] = {"dataclass": dataclasses.dataclass, "torch": torch}
    exec(compile(lift(p, "PendingSave"), str(p), "exec"), ns)  # noqa: S102  # the release's own record
    pending_save = dataclasses.dataclass(ns["PendingSave"])  # its @dataclass, which the lifted body leaves out
    tch = _TorchOnCpu()
    extract = _fn(p, "extract_from_kv_cache", torch=tch)
    write = _fn(p, "_write_tensors", "ExampleHiddenStatesConnector", save_file=_save_file(), os=os)
    written = []
    for i, (s, a) in enumerate(zip(seqs, aux)):
        T = len(s)
        n, H = 3, a.shape[1] // 3
        nb = (T + block_size - 1) // block_size
        block_ids = [2 * b + 1 for b in range(nb)]  # not contiguous: the slot mapping must be followed
        kv = torch.zeros(2 * nb + 2, n, block_size, H, dtype=a.dtype)
        for t in range(T):
            kv[block_ids[t // block_size], :, t % block_size] = a[t].reshape(n, H)
        req_id = f"req-{first_id + i}"  # request ids are unique across data-parallel workers
        fname = str(out_dir / f"{req_id}.safetensors")
        conn = Obj(_request_filenames={req_id: fname}, _pending_saves={}, _is_tp_rank_zero=tp_rank == 0, _kv_cache=kv,
                   _block_size=block_size, _copy_stream=None, _req_futures={}, _lock_fds={}, use_lock=False,
                   _req_copy_events={}, _executor=_Inline(), _write_tensors=write)  # fmt: skip
        conn._get_copy_stream = lambda: Anything()
        conn._on_write_done = lambda *_a: None
        finished = _fn(p, "request_finished", "ExampleHiddenStatesConnector", torch=tch, PendingSave=pending_save,
                       logger=Anything())  # fmt: skip
        submit = _fn(p, "_submit_async_write", "ExampleHiddenStatesConnector", torch=tch, extract_from_kv_cache=extract,
                     gpu_sync_allowed=contextlib.nullcontext, os=os, partial=__import__("functools").partial)  # fmt: skip
        request = Obj(
            request_id=req_id, kv_transfer_params={"include_output_tokens": True}, all_token_ids=[*s, 0], prompt_token_ids=None
        )  # the last output token is never a forward's input
        finished(conn, request, block_ids)
        submit(conn, conn._pending_saves[req_id])
        if os.path.exists(fname):
            written.append(Path(fname))
    return written


def _save_file() -> Any:
    from safetensors.torch import save_file

    return save_file
