"""Where a command's time goes before its first progress line: the command run in this process, the functions of its
start-up timed on entry and exit (on a GPU each exit waits for the device, so a function's time includes its kernels).

    PYTHONPATH=. python3 bench/trace_startup.py acceptance --target /tmp/e2e/target --draft /tmp/e2e/draft ...

Prints one line per call to stderr, ``trace <start s> <length s> <thread> <function>``, times from this script's
first instruction (the interpreter's own start before it is not counted), then the command's report as usual.
Only the first three calls of each function are printed (a decode step runs hundreds of times).
``--profile FILE`` first: the whole command under cProfile as well, its statistics written to FILE at the exit
handlers (the console process skips the interpreter's teardown, so ``python -m cProfile`` would write nothing);
with ``CUDA_LAUNCH_BLOCKING=1`` a function's time includes its kernels.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import functools  # noqa: E402
import importlib  # noqa: E402
import importlib.abc  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

WATCHED = (
    "eagle3_doctor.model.ahead:_context",
    "eagle3_doctor.model.ahead:_triton",
    "eagle3_doctor.cli.resolve:preflight_given",
    "eagle3_doctor.cli.resolve:resolve_serve",
    "eagle3_doctor.analyses.inspect.tensors:refuse_nonfinite",
    "eagle3_doctor.model.setup:load_setup",
    "eagle3_doctor.model.setup:_load_draft",
    "eagle3_doctor.model.setup:_check_finite_target",
    "eagle3_doctor.model.target:resolve_device",
    "eagle3_doctor.model.target:_native_target",
    "eagle3_doctor.model.native.plan:native_plan",
    "eagle3_doctor.model.native.read:read_tensors",
    "eagle3_doctor.model.tokenizer:load_tokenizer",
    "eagle3_doctor.model.tokenizer:taken",
    "eagle3_doctor.draft.gpu.fused:prepare",
    "eagle3_doctor.model.replay:load_sources",
    "eagle3_doctor.model.static:greedy_static",
    "eagle3_doctor.model.static:StaticDecoder.prefill",
    "eagle3_doctor.model.static:StaticDecoder.forward",
    "eagle3_doctor.draft.gpu.fused:_runs",
    "eagle3_doctor.model.native.spans:_runs",
    "eagle3_doctor.analyses.acceptance.run:measure_acceptance",
    "eagle3_doctor.analyses.acceptance.measurement:Measurement.replay",
    "eagle3_doctor.cli.drive:finish",
)
_calls: Counter[str] = Counter()


def _sync() -> None:
    if threading.current_thread() is not threading.main_thread():  # a helper thread's call: its own time only
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        if not torch.cuda.is_current_stream_capturing():  # a call inside a graph's capture: no sync may run there
            torch.cuda.synchronize()


def _timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def run(*a: Any, **k: Any) -> Any:
        _calls[name] += 1
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            _sync()
            if _calls[name] <= 3:
                now = time.perf_counter()
                who = threading.current_thread().name
                print(f"trace {t - T0:8.3f} {now - t:8.3f} {who:>12} {name}", file=sys.stderr, flush=True)

    return run


class OnImport(importlib.abc.MetaPathFinder):
    """The functions ``specs`` names ("module:attr", "module:Class.method") wrapped by ``wrap(attr, fn)`` as each
    module is first imported, whenever the command imports it: the command's own import order is kept (its tokenizer
    helper starts before torch's import, as it does untraced), and a module that imports a watched function by name
    imports the wrapper. bench/profile_phase.py uses it too."""

    def __init__(self, specs: Any, wrap: Any) -> None:
        self.wrap = wrap
        self.pending: dict[str, list[str]] = {}
        for spec in specs:
            mod_name, attr = spec.split(":")
            self.pending.setdefault(mod_name, []).append(attr)

    def patch(self, module: Any, attr: str) -> None:
        owner, _, leaf = attr.rpartition(".")
        holder = getattr(module, owner) if owner else module
        setattr(holder, leaf, self.wrap(attr, getattr(holder, leaf)))

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                attrs, real = self.pending.pop(name), spec.loader.exec_module

                def exec_module(module: Any, _real: Any = real, _attrs: list[str] = attrs) -> None:
                    _real(module)
                    for a in _attrs:
                        self.patch(module, a)

                spec.loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


def main() -> None:
    sys.meta_path.insert(0, OnImport(WATCHED, _timed))
    from eagle3_doctor.cli import run

    t = time.perf_counter()
    print(f"trace {0:8.3f} {t - T0:8.3f} {'MainThread':>12} imports (the CLI's)", file=sys.stderr, flush=True)
    args = sys.argv[1:]
    if args[:1] == ["--profile"]:
        import atexit
        import cProfile

        prof, path = cProfile.Profile(), args[1]
        args = args[2:]
        atexit.register(lambda: (prof.disable(), prof.dump_stats(path)))
        prof.enable()
    sys.argv = ["eagle3-doctor", *args]
    try:
        run()
    except SystemExit as done:
        print(f"trace {time.perf_counter() - T0:8.3f} {0:8.3f} {'MainThread':>12} end (exit {done.code})", file=sys.stderr)
        raise


if __name__ == "__main__":
    main()
