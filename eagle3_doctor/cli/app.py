"""eagle3-doctor command line: parse options, call the library, render. Nothing else.

torch and transformers are imported inside the commands so ``--help`` answers at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Annotated, Any, Optional

import typer

from .. import __version__
from ..core.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    DoctorError,
    one_line,
)
from ..core.findings import exit_code, locate


class _OneLineGroup(typer.core.TyperGroup):
    """Click's own errors (unknown option, missing --target, --limit two) as the one promised line.

    Click would print a three-line usage block; here every way out of the program is one line
    on stderr and an exit code: 0 ok, 1 findings, 2 bad input, 3 a bug, 130/143 interrupted.
    """

    def main(
        self, args: Any = None, prog_name: Any = None, complete_var: Any = None, standalone_mode: bool = True, **extra: Any
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        cx = _click_exceptions()
        # started with stdout or stderr closed (`>&-`): Python sets them to None; write into the void
        if sys.stdout is None:
            sys.stdout = open(os.devnull, "w")
        if sys.stderr is None:
            sys.stderr = open(os.devnull, "w")
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            _flush_stdout()
        except getattr(cx, "NoArgsIsHelpError", ()) as e:  # bare `eagle3-doctor`: the help is the answer
            try:
                print(e.ctx.get_help(), flush=True)
            except BrokenPipeError:
                _silence_stdout()
            except OSError as err:
                sys.exit(_environment_exit(err))
            sys.exit(EXIT_OK)
        except BrokenPipeError:  # `--help | head`: the reader had what it wanted
            _silence_stdout()
            sys.exit(EXIT_OK)
        except OSError as e:  # `--help > /dev/full`: the disk refused, not the tool
            sys.exit(_environment_exit(e))
        except cx.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "eagle3-doctor"
            _fail(f"error: {e.format_message()} -- fix: see `{cmd} --help`")
            sys.exit(EXIT_BAD_INPUT)
        except cx.ClickException as e:
            _fail(f"error: {e.format_message()} -- fix: see `eagle3-doctor --help`")
            sys.exit(EXIT_BAD_INPUT)
        except (typer.Abort, getattr(cx, "Abort", typer.Abort)):
            _fail("interrupted: no report was written")
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


def _click_exceptions() -> Any:
    """typer >= 0.26 vendors click as typer._click; older typers use click itself."""
    vendored = getattr(typer.core, "_click", None)
    if vendored is not None:
        return vendored.exceptions
    import click

    return click.exceptions


app = typer.Typer(
    cls=_OneLineGroup,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    help="Find out why an EAGLE-3 draft accepts fewer tokens in serving than it did in training.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts contain brackets ([gate], specforge[:ids]) that are not markup
)

# ----------------------------------------------------------------------------- shared options
# Choices shown in --help as metavars (validated in the library, so a wrong value is one error line,
# case-insensitive for --engine); tests/test_servecmd.py keeps them equal to the library's tuples.
ENGINE_CHOICES = ("sglang", "vllm", "trtllm", "modelopt", "eagle")
FORMAT_CHOICES = ("eagle", "sglang", "speculators")
DTYPE_CHOICES = ("auto", "bfloat16", "float16", "float32")
Target = Annotated[str, typer.Option("--target", "-t", help="Target model: local directory or hub id.")]
Draft = Annotated[
    Optional[str],
    typer.Option(
        "--draft", "-d", help="EAGLE-3 draft checkpoint: local directory or hub id (default: the draft of --serve-cmd)."
    ),
]
DraftFormat = Annotated[
    Optional[str],
    typer.Option(
        "--draft-format",
        metavar="[" + "|".join(FORMAT_CHOICES) + "]",
        help="Force the draft format: eagle, sglang or speculators (default: detect).",
    ),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        metavar="[" + "|".join(ENGINE_CHOICES) + "]",
        help="Serving engine: sglang, vllm, trtllm, modelopt or eagle.",
    ),
]
EngineVersion = Annotated[
    Optional[str],
    typer.Option(
        "--engine-version",
        metavar="VERSION",
        help="Engine release whose rules apply: any sglang/vllm release (0.5.10, 0.33, 0.33.1); vllm -v1/-v2 picks the model runner; sglang +minus-one-embed for a build patched to map id -1 to the embeddings; modelopt any release from 0.35.0; trtllm 1.2|1.2-two-model.",
    ),
]
RequiredDraft = Annotated[str, typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint: local directory or hub id.")]
LayerIds = Annotated[
    Optional[str],
    typer.Option(
        "--layer-ids", help="Try these serving ids (as the engine's key would hold them) without editing files, e.g. 1,3,4."
    ),
]
TrainRecipe = Annotated[
    Optional[str],
    typer.Option(
        "--train-recipe",
        help="How training features were made: hf-hidden-states:I,J,K | eagle-default | specforge[:ids] | speculators[:ids] | modelopt[:ids] | spec:POINTS. Default: what the draft config declares.",
    ),
]
TrainDump = Annotated[
    Optional[str],
    typer.Option(
        "--train-dump", help="Training feature dump: SpecForge rows_*/data_*.ckpt(.gz) directory, or safetensors files."
    ),
]
Prompts = Annotated[
    Optional[str],
    typer.Option(
        "--prompts",
        help='JSONL chat messages ({"messages": [...]}) or plain text, one prompt per line. Default: built-in prompts.',
    ),
]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Truncate each prompt or dump sequence to this many tokens.")]
BatchSize = Annotated[str, typer.Option("--batch-size", help="Sequences per forward, or 'auto' (sized from free GPU memory).")]
Limit = Annotated[Optional[int], typer.Option("--limit", help="Use only the first N prompts or dump files.")]
Dtype = Annotated[
    str, typer.Option("--dtype", metavar="[" + "|".join(DTYPE_CHOICES) + "]", help="auto, bfloat16, float16 or float32.")
]
Device = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
DeviceMap = Annotated[
    Optional[str], typer.Option("--device-map", help="Shard the target: auto, balanced or a JSON device map (needs accelerate).")
]
MaxMemory = Annotated[
    Optional[str], typer.Option("--max-memory", help="With --device-map: memory per device, e.g. 0=70GiB,1=70GiB,cpu=200GiB.")
]
TrustRemote = Annotated[
    bool, typer.Option("--trust-remote-code", help="Allow the target's own modelling code to run (off unless you ask).")
]
JsonOut = Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to this path.")]
ReportDir = Annotated[
    Optional[str],
    typer.Option("--report", help="Write a Markdown report (with PNG plots if matplotlib is installed) into this directory."),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
# serving evidence (issue 16): what the live server counted
ServerMetrics = Annotated[
    Optional[str],
    typer.Option(
        "--server-metrics",
        help="The server's Prometheus scrape (vLLM or SGLang /metrics) as a file or http(s) URL, taken after the workload.",
    ),
]
ServerMetricsBefore = Annotated[
    Optional[str],
    typer.Option("--server-metrics-before", help="A scrape taken before the workload: figures become after minus before."),
]
ServerLog = Annotated[
    Optional[str], typer.Option("--server-log", help="SGLang server log: its 'Decode batch ... accept len' lines.")
]
ServerModel = Annotated[
    Optional[str], typer.Option("--server-model", help="model_name label to read when a scrape holds several models.")
]
# i17: serving config in (the user's own launch command sets engine, draft, steps, topk, budget, dtype)
OptTarget = Annotated[
    Optional[str],
    typer.Option("--target", "-t", help="Target model: local directory or hub id (default: the model of --serve-cmd)."),
]
ServeCmd = Annotated[
    Optional[str],
    typer.Option(
        "--serve-cmd",
        help="Your server launch command (python -m sglang.launch_server ... | vllm serve MODEL --speculative-config '{...}'): engine, draft, steps, topk, draft-token budget and dtype are read from it; explicit options win.",
    ),
]
Revision = Annotated[Optional[str], typer.Option("--revision", help="Hub revision (branch, tag or commit) of a hub-id --target.")]
DraftRevision = Annotated[
    Optional[str], typer.Option("--draft-revision", help="Hub revision (branch, tag or commit) of a hub-id --draft.")
]
ServeConfigFile = Annotated[
    Optional[str],
    typer.Option(
        "--serve-config",
        help="File with the launch command, or a JSON/YAML of SGLang server args, vLLM engine args or vLLM's speculative config.",
    ),
]


def _console(stderr: bool = False):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handler exits 1, which CI reads as "findings": let the error boundary say it
            _silence_stdout()
            raise BrokenPipeError(32, "standard output was closed")

    # piped output (CI logs) defaults to 80 columns in rich: too narrow for the slot tables
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return _Console(stderr=stderr, highlight=False, soft_wrap=False, width=None if wide else 160)


def _fail(line: str) -> None:
    # plain print, not rich: one line must stay one line whatever the terminal width; a newline
    # inside a path is escaped for the same reason
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if stream is None:
        return
    try:
        print(f"eagle3-doctor: {one_line(line)}", file=stream, flush=True)
    except (OSError, ValueError):  # stderr closed too: the exit code is all that is left
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so it unwinds like Ctrl-C: temp files removed, old reports kept."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _silence_stdout() -> None:
    """stdout's reader went away: point fd 1 at /dev/null so the final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _report_bug(exc: BaseException) -> str:
    """Write the full traceback to a file; return where (or why not)."""
    import tempfile
    import time
    import traceback

    text = f"eagle3-doctor {__version__}, Python {sys.version.split()[0]}, {sys.platform}\nargv: {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    try:
        fd, path = tempfile.mkstemp(prefix=f"eagle3-doctor-bug-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    except OSError as e:
        return f"nowhere (cannot write a file in {tempfile.gettempdir()}: {e.strerror})"


def _flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def _environment_exit(e: OSError) -> int:
    """_exit_if_environment where click's own output (--help, --version) failed: the exit code to leave with."""
    try:
        _exit_if_environment(e)
    except typer.Exit as ex:
        return ex.exit_code
    raise e


def _exit_if_environment(e: BaseException) -> None:
    """A write the machine refused (disk full, read-only, no permission, a directory, a closed pipe) is
    exit 2 with the path and the fix, not a bug report: the user's environment, not the tool, is at fault."""
    from ..io.safeio import write_fault

    name = getattr(e, "filename", None)
    # safeio names the files it writes itself; a fault without a file name is stdout's final flush
    err = write_fault(e, name or "standard output", "cannot write" if name is None else "cannot use")
    if err is None:
        return
    if name is None:
        _silence_stdout()  # what is still buffered for stdout would fail again at exit
    _fail(f"error: {err}")
    raise typer.Exit(EXIT_BAD_INPUT) from None


def guarded(fn: Callable[..., int]) -> Callable[..., None]:
    """The one error boundary: whatever escapes a command becomes one line on stderr and an exit code.

    Bad input (DoctorError) exits 2 with a fix; an exception nobody anticipated is a bug and exits 3
    (never 1, which CI reads as findings), naming the version and the file holding the traceback.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        import signal
        import threading

        old = old_int = None
        if threading.current_thread() is threading.main_thread():
            old = signal.signal(signal.SIGTERM, _on_sigterm)
            # Ctrl-C unwinds as KeyboardInterrupt from here on (the start-up handler exits at once)
            old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            code = fn(*args, **kwargs)
            _flush_stdout()  # a full disk or closed pipe under stdout surfaces here, not after exit
        except DoctorError as e:
            _fail(f"error: {e}")
            raise typer.Exit(e.exit_code) from None
        except Terminated:
            _fail("terminated (SIGTERM): no report was written")
            raise typer.Exit(EXIT_TERMINATED) from None
        except KeyboardInterrupt:
            _fail("interrupted: no report was written")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except MemoryError:
            _fail("error: out of host memory -- fix: lower --batch-size or --max-tokens")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (typer.Exit, SystemExit, _click_exceptions().ClickException):
            raise  # usage errors raised inside a command get click's one-line form from _OneLineGroup
        except BrokenPipeError:
            _silence_stdout()
            _fail(
                "error: standard output was closed before the results were written -- fix: keep the reader "
                "open (e.g. pipe into `less`, not `head`) or write --json FILE"
            )
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Exception as e:
            _exit_if_environment(e)
            if type(e).__name__ == "OutOfMemoryError":  # torch.cuda.OutOfMemoryError, without importing torch
                _fail("error: CUDA out of memory -- fix: halve --batch-size (or use --batch-size auto)")
                raise typer.Exit(EXIT_BAD_INPUT) from None
            where = _report_bug(e)
            _fail(
                f"bug: {type(e).__name__}: {str(e)[:200]} (eagle3-doctor {__version__}); this is a bug in "
                f"eagle3-doctor, not in your input; full traceback in {where}; please report it with that file"
            )
            raise typer.Exit(EXIT_BUG) from None
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
        raise typer.Exit(code)

    return wrapper


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Yield a progress callback (label, done, total).

    On a terminal: rich bars with elapsed time and ETA. Otherwise (CI logs, pipes): one plain line
    per phase when it starts, then at most one every EAGLE3_DOCTOR_PROGRESS_EVERY seconds (default 10)
    and one when it completes, each with done/total, elapsed and ETA.
    """
    if quiet:
        yield lambda *_: None
        return
    if not sys.stderr.isatty():
        import time

        every = float(os.environ.get("EAGLE3_DOCTOR_PROGRESS_EVERY", "10"))
        state: dict[str, list[float]] = {}

        def plain(label: str, done: int, total: int) -> None:
            now = time.monotonic()
            st = state.setdefault(label, [now, -1.0])
            start, last = st
            if done < total and last >= 0 and now - last < every:
                return
            if done >= total and last == -2.0:
                return
            el = now - start
            eta = f", eta {el / done * (total - done):.0f}s" if 0 < done < total else ""
            pct = f" ({100 * done / total:.0f}%)" if total else ""
            print(f"eagle3-doctor: {label}: {done}/{total}{pct}, {el:.0f}s elapsed{eta}", file=sys.stderr, flush=True)
            st[1] = -2.0 if done >= total else now

        yield plain
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=_console(stderr=True),
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def cb(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = prog.add_task(label, total=total)
        prog.update(tasks[label], completed=done, total=total)

    with prog:
        yield cb


@contextlib.contextmanager
def _status(text: str, quiet: bool) -> Iterator[None]:
    """A line the moment a slow step starts (loading, first import): a spinner on a terminal."""
    if quiet or not sys.stderr.isatty():
        yield
        return
    with _console(stderr=True).status(text):
        yield


@dataclasses.dataclass
class _Resolved:
    target: str
    draft: Optional[str]
    engine: str
    engine_version: Optional[str]
    dtype: str
    serve: Any = None
    paths: dict[str, str] = dataclasses.field(default_factory=dict)  # finding roles -> the files this run used
    findings: list[Any] = dataclasses.field(default_factory=list)  # what the launch command alone shows

    def locate(self, findings: list[Any]) -> None:
        """The launch command's findings first in a command's list (they are read before anything is
        measured), and every finding pointed at the file this run used."""
        findings[:0] = [f for f in self.findings if f not in findings]
        locate(findings, self.paths)


def _missing_option(flag: str, what: str) -> None:
    """The same one-line usage error click gives for a required option (--serve-cmd may stand in for it)."""
    vendored = getattr(typer.core, "_click", None)
    if vendored is not None:
        ctx = vendored.globals.get_current_context(silent=True)
    else:
        import click

        ctx = click.get_current_context(silent=True)
    raise _click_exceptions().UsageError(f"Missing option '{flag}' (or a --serve-cmd that names {what})", ctx=ctx)


def _resolve_serve(a: SimpleNamespace, need_draft: bool = False) -> _Resolved:
    """Merge --serve-cmd/--serve-config with explicit options (explicit wins) and say what was derived.

    ``a``: the command's options by name (its locals on entry); absent ones count as not given."""
    from ..engines.launch import load

    target, draft, engine, engine_version = a.target, getattr(a, "draft", None), a.engine, a.engine_version
    revision, draft_revision, dtype = (
        getattr(a, "revision", None),
        getattr(a, "draft_revision", None),
        getattr(a, "dtype", "auto"),
    )
    sc = load(getattr(a, "serve_cmd", None), getattr(a, "serve_config", None))
    if sc is not None and not target:
        _speculators_from_hub(sc)
    from ..io.overlap import check_outputs_apart

    # the models the launch command names are inputs too: refused before the summary line is printed
    check_outputs_apart({**vars(a), "target": target or (sc and sc.target), "draft": draft or (sc and sc.draft)})
    if sc is not None:
        from .validate import preflight_named_models

        preflight_named_models(None if target else sc.target, None if draft else sc.draft)
        msg = f"serving config: {sc.summary()}"
        if sc.unknown_flags:
            msg += f"\n  unknown flags (not in {sc.engine} {sc.engine_version}'s argument table): {', '.join(sc.unknown_flags)}"
        for n in sc.notes:
            msg += f"\n  note: {n}"
        print(msg, file=sys.stderr, flush=True)
    target = target or (sc.target if sc else None)
    if not target:
        _missing_option("--target", "the model")
    draft = draft or (sc.draft if sc else None)
    if need_draft and not draft:
        _missing_option("--draft", "the draft path")
    eng = (engine or (sc.engine if sc else None) or "sglang").lower()
    ver = engine_version or (sc.engine_version if sc and sc.engine == eng else None)
    if dtype == "auto" and sc is not None and sc.dtype not in (None, "auto"):
        dtype = {"half": "float16", "bf16": "bfloat16", "fp16": "float16", "float": "float32"}.get(sc.dtype, sc.dtype)
    from ..engines.releases import check_engine
    from ..io.hub import role_paths

    # the engine and release as resolved (from --serve-cmd, or the sglang default), refused before any download or load
    check_engine(eng, ver)

    # hub ids (with a revision) become local snapshots here; local-looking paths never reach the hub
    if revision is None and sc is not None and target == sc.target:
        revision = sc.target_revision
    if draft_revision is None and sc is not None and draft == sc.draft:
        draft_revision = sc.draft_revision
    target_dir, draft_dir = _resolve_models(target, draft, getattr(a, "draft_format", None), revision, draft_revision)
    paths = role_paths(target, draft, target_dir=target_dir, draft_dir=draft_dir, serve_config=getattr(a, "serve_config", None))
    if (target_dir, draft_dir) != (target, draft):  # hub snapshots: outputs kept out of them too
        check_outputs_apart({**vars(a), "target": target_dir, "draft": draft_dir})
    from ..engines.launch import launch_findings

    return _Resolved(target_dir, draft_dir, eng, ver, dtype, sc, paths, launch_findings(sc) if sc else [])


def _speculators_from_hub(sc: Any) -> None:
    """``vllm serve org/speculators-draft``: the checkpoint's config.json (cached or downloaded) says which
    verifier vLLM loads as the target; a local checkpoint was read when the command was parsed."""
    from ..io.hub import resolve
    from .validate import is_hub_id

    if sc.engine != "vllm" or sc.draft is not None or not sc.target or not is_hub_id(sc.target):
        return
    from ..engines.launch import local_config, speculators_verifier

    speculators_verifier(sc, local_config(resolve(sc.target, sc.target_revision, "target")))
    if sc.draft is not None:
        sc.draft_revision, sc.target_revision = sc.target_revision, None


def _resolve_models(
    target: Optional[str],
    draft: Optional[str],
    draft_format: Optional[str] = None,
    revision: Optional[str] = None,
    draft_revision: Optional[str] = None,
) -> tuple[Optional[str], Optional[str]]:
    """Local directories for --target and --draft: hub ids become cached (or downloaded) snapshots,
    checked as a local directory is; local-looking paths never reach the hub."""
    from ..io.hub import resolve
    from .validate import check_resolved

    target_dir = resolve(target, revision, "target") if target else None
    draft_dir = resolve(draft, draft_revision, "draft") if draft else None
    check_resolved(target, target_dir, "target")
    check_resolved(draft, draft_dir, "draft", draft_format)
    return target_dir, draft_dir


def _setup(a: SimpleNamespace, r: _Resolved) -> Any:
    """Target and draft loaded as ``r`` resolved them, with the command's loading options ``a``."""
    g = functools.partial(getattr, a)
    with _status(f"loading target {r.target}" + (f" and draft {r.draft}" if r.draft else "") + " ...", g("quiet", False)):
        from ..doctor import load_setup
        from .validate import parse_layer_ids

        return load_setup(
            target=r.target,
            draft=r.draft,
            draft_format=g("draft_format", None),
            engine=r.engine,
            engine_version=r.engine_version,
            layer_ids=parse_layer_ids(g("layer_ids", None)),
            train_recipe=g("train_recipe", None),
            dtype=r.dtype,
            device=a.device,
            trust_remote_code=a.trust_remote_code,
            device_map=_device_map(g("device_map", None)),
            max_memory=_max_memory(g("max_memory", None)),
        )


def _tool() -> dict:
    """Stamped into every --json document (schemas/*.schema.json): which tool, which command line."""
    return {"name": "eagle3-doctor", "version": __version__, "command": ["eagle3-doctor", *sys.argv[1:]]}


# checked where they are resolved (``_resolve_serve``, ``_dump_training_spec``, the gate's merged policy in
# ``check_policy_values``), once, on the value the run uses, and still before any load: not in the preflight
RESOLVED_LATER = ("engine", "engine_version")


def _preflight(a: SimpleNamespace, skip: tuple[str, ...] = ()) -> None:
    """Every option a command was given (``a``: its locals on entry), checked before torch is imported
    or a model is loaded.

    Commands that resolve the engine through ``_resolve_serve`` skip --engine/--engine-version
    (``RESOLVED_LATER``): the engine is checked once, on the value the run uses (--serve-cmd merged),
    still before any download or load."""
    from .validate import preflight

    preflight(**{k: v for k, v in vars(a).items() if k not in skip})


def _write_json(path: Optional[str], data: dict, trust_remote_code: bool) -> None:
    if path:
        from ..io.safeio import write_json

        write_json(path, {**data, "tool": _tool(), "trust_remote_code": trust_remote_code})


def _batch_size(text: str, setup: Any, max_tokens: int) -> int:
    if text == "auto":
        from ..model.runtime import auto_batch_size

        return auto_batch_size(setup.target, max_tokens)
    from .validate import check_arguments

    check_arguments(batch_size=text)
    return int(text)


def _max_memory(text: Optional[str]):
    if text is None:
        return None
    from .validate import parse_max_memory

    return parse_max_memory(text)


def _device_map(text: Optional[str]):
    if text is None:
        return None
    if text.strip().startswith("{"):
        import json

        from ..core.errors import BadInput

        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput(f"--device-map is not valid JSON ({e.msg})", 'write e.g. {"model.layers.0": 0, ...} or auto') from None
    return text


@app.callback(invoke_without_command=True)
def main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        print(f"eagle3-doctor {__version__}")
        raise typer.Exit(EXIT_OK)


@app.command("inspect")
@guarded
def inspect_cmd(
    target: OptTarget = None,
    draft: Draft = None,
    draft_format: DraftFormat = None,
    engine: Annotated[Optional[str], typer.Option("--engine", "-e", metavar="[" + "|".join(ENGINE_CHOICES) + "]", help="Serving engine, any case (default: from --serve-cmd, else sglang).")] = None,
    engine_version: EngineVersion = None,
    serve_cmd: ServeCmd = None,
    serve_config: ServeConfigFile = None,
    revision: Revision = None,
    draft_revision: DraftRevision = None,
    json_out: JsonOut = None,
    report: ReportDir = None,
) -> int:  # fmt: skip
    """Audit the draft checkpoint and config against the target and engine. No forward pass."""
    a = SimpleNamespace(**locals())  # the options by name, as given
    _preflight(a, skip=RESOLVED_LATER)
    from ..analyses.inspect_draft import inspect
    from ..io.safeio import write_json
    from ..report.render import render_inspect

    r = _resolve_serve(a, need_draft=True)
    res = inspect(r.target, r.draft, engine=r.engine, engine_version=r.engine_version, draft_format=draft_format)
    r.locate(res.findings)
    render_inspect(_console(stderr=json_out == "-"), res)
    if json_out:
        write_json(json_out, {**res.to_dict(), "tool": _tool(), **({"serve": r.serve.to_dict()} if r.serve else {})})
    if report:
        from ..report.render import write_inspect_report

        write_inspect_report(res, report)
    return exit_code(res.findings, "warning")


@app.command("compare-hidden")
@guarded
def compare_hidden_cmd(
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="Target model: local directory or hub id (default: the model of --serve-cmd). Leave out to diff --train-dump against --engine-dump without loading it.")] = None,
    draft: Draft = None,
    draft_format: DraftFormat = None,
    engine: Annotated[Optional[str], typer.Option("--engine", "-e", metavar="[" + "|".join(ENGINE_CHOICES) + "]", help="Serving engine, any case (default: from --serve-cmd, else sglang).")] = None,
    engine_version: EngineVersion = None,
    serve_cmd: ServeCmd = None,
    serve_config: ServeConfigFile = None,
    revision: Revision = None,
    draft_revision: DraftRevision = None,
    layer_ids: LayerIds = None,
    train_recipe: TrainRecipe = None,
    train_dump: TrainDump = None,
    prompts: Prompts = None,
    max_tokens: MaxTokens = 512,
    batch_size: BatchSize = "8",
    limit: Limit = None,
    matrix: Annotated[bool, typer.Option("--matrix", help="Compare every serving slot against every capture point (holds all L+2 states per batch).")] = False,
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write the slot x capture-point heatmap PNG here (implies --matrix).")] = None,
    dtype: Dtype = "auto",
    device: Device = "auto",
    device_map: DeviceMap = None,
    max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False,
    json_out: JsonOut = None,
    report: ReportDir = None,
    quiet: Quiet = False,
    engine_dump: Annotated[Optional[str], typer.Option("--engine-dump", help="Hidden states the engine captured itself: SGLang debug-dumper directory or vLLM hidden-states safetensors. Without --target: diffed against --train-dump.")] = None,
    num_layers: Annotated[Optional[int], typer.Option("--num-layers", help="Without --target: the target's number of decoder layers (for the layer ids in the fix).")] = None,
) -> int:  # fmt: skip
    """Training features vs what the serving engine captures: slot by slot, with the exact fix."""
    a = SimpleNamespace(**locals())  # the options by name, as given
    _preflight(a, skip=RESOLVED_LATER)
    from ..doctor import compare_hidden
    from ..report.render import render_compare

    if engine_dump is not None or (target is None and serve_cmd is None and serve_config is None):
        return _compare_dumps(a)
    r = _resolve_serve(a)
    setup = _setup(a, r)
    bs = _batch_size(batch_size, setup, max_tokens)
    with _progress(quiet) as cb:
        res = compare_hidden(
            setup,
            prompts_path=prompts,
            train_dump=train_dump,
            max_tokens=max_tokens,
            batch_size=bs,
            matrix=matrix or plot is not None or report is not None,
            limit=limit,
            progress=cb,
        )
    r.locate(res.findings)
    render_compare(_console(stderr=json_out == "-"), res)  # `--json -` owns stdout
    _write_json(json_out, {**res.to_dict(), **({"serve": r.serve.to_dict()} if r.serve else {})}, trust_remote_code)
    if plot or report:
        from ..report.render import write_compare_report

        write_compare_report(res, report, plot)
    return exit_code(res.findings, "warning")


def _compare_dumps(a: SimpleNamespace) -> int:
    """Dump vs dump (issue 16): the engine did the forward; the target is never loaded."""
    from ..analyses.engine_dump import compare_dumps
    from ..io.hub import role_paths
    from ..report.render import render_compare

    tspec, tsrc, engine = _dump_training_spec(a)
    res = compare_dumps(
        a.engine_dump,
        a.train_dump,
        train_spec=tspec,
        train_source=tsrc,
        engine=engine,
        engine_version=a.engine_version,
        num_layers=a.num_layers,
        limit=a.limit,
        max_tokens=a.max_tokens,
    )
    locate(res.findings, role_paths(draft=a.draft))
    render_compare(_console(), res)
    _write_json(a.json_out, res.to_dict(), False)
    return exit_code(res.findings, "warning")


def _dump_training_spec(a: SimpleNamespace) -> tuple[Any, str, str]:
    """What the training dump's slots are, from --train-recipe or the draft's config, for a target never
    loaded; and the engine, resolved and checked before the draft is read."""
    from ..core.errors import BadInput

    target, engine_dump, train_dump, num_layers = a.target, a.engine_dump, a.train_dump, a.num_layers
    train_recipe, draft, engine, engine_version = a.train_recipe, a.draft, a.engine, a.engine_version
    if target is not None:
        raise BadInput("--engine-dump is compared with --train-dump without the target", "drop --target (or drop --engine-dump)")
    if not engine_dump or not train_dump:
        # worded as click's own usage error: --target is only optional for dump vs dump
        raise BadInput(
            "Missing option '--target' (or --engine-dump with --train-dump: dump vs dump, no target)",
            "see `eagle3-doctor compare-hidden --help`",
        )
    if num_layers is None or num_layers < 1:
        raise BadInput(
            "dump vs dump needs the target's layer count for the fix",
            "pass --num-layers N (num_hidden_layers of the target's config.json)",
        )
    from ..engines.recipes import training_spec
    from ..engines.releases import check_engine

    engine = (engine or "sglang").lower()  # as with a target: any case, sglang by default
    check_engine(engine, engine_version)  # before the draft is read

    if train_recipe:
        tspec, tsrc = training_spec(train_recipe, num_layers)
    elif draft:
        from ..draft.formats import read_draft, spec_from_info

        _, draft_dir = _resolve_models(None, draft, a.draft_format)
        _, info = read_draft(draft_dir, fmt=a.draft_format, device="cpu", dtype=None)
        tspec, tsrc = spec_from_info(info, num_layers)
    else:
        raise BadInput(
            "dump vs dump needs to know what the training dump's slots are",
            "pass --draft DIR (its config's ids) or --train-recipe",
        )
    for p in tspec:
        p.check_range(num_layers)
    return tspec, tsrc, engine


# acceptance's own options (one line each in the command's signature below)
OptEngine = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        "-e",
        metavar="[" + "|".join(ENGINE_CHOICES) + "]",
        help="Serving engine, any case (default: from --serve-cmd, else sglang).",
    ),
]
NumSteps = Annotated[
    Optional[int],
    typer.Option(
        "--num-steps",
        "-k",
        help="Draft steps K per verify pass (SGLang --speculative-num-steps, vLLM num_speculative_tokens). Default: from --serve-cmd, else 7.",
    ),
]
Continuation = Annotated[
    str,
    typer.Option(
        "--continuation",
        metavar="[greedy|text]",
        help="greedy: the target's own greedy continuation (KV cache); text: the text as given.",
    ),
]
MaxNewTokens = Annotated[
    int, typer.Option("--max-new-tokens", help="Tokens the target generates per prompt (greedy continuation).")
]
Temperature = Annotated[
    float, typer.Option("--temperature", help="> 0: expected acceptance from the distributions (no sampling noise).")
]
TemperatureMode = Annotated[
    str,
    typer.Option(
        "--temperature-mode",
        metavar="[sampled|argmax]",
        help="sampled: draft samples, sum min(p,q); argmax: draft proposes argmax (vLLM V1), p(token).",
    ),
]
TopK = Annotated[
    Optional[int],
    typer.Option(
        "--topk", help="Tree drafting: children per node (SGLang --speculative-eagle-topk). Default: from --serve-cmd, else 1."
    ),
]
NumDraftTokens = Annotated[
    Optional[int],
    typer.Option(
        "--num-draft-tokens",
        help="Tree node budget incl. the root (SGLang --speculative-num-draft-tokens). Default: from --serve-cmd.",
    ),
]
ReferenceLoop = Annotated[
    bool,
    typer.Option(
        "--reference-loop", help="Also run a plain sequential speculative-decoding loop and check the estimator against it."
    ),
]
Scan = Annotated[
    bool, typer.Option("--scan", help="Rank candidate capture-point triples around the configured one by step-1 accuracy.")
]
CompileDraft = Annotated[
    bool,
    typer.Option(
        "--compile",
        help="torch.compile the draft's step pieces: on a GPU acceptance runs at 1.34x a bare target forward instead of 1.40x (bench/RESULTS.md); the first batch pays the compilation; no gain on CPU.",
    ),
]
MinAcceptRate = Annotated[
    Optional[float],
    typer.Option("--min-accept-rate", help="Gate: exit 1 if the serving path's first-position acceptance is below this."),
]
MinTau = Annotated[Optional[float], typer.Option("--min-tau", help="Gate: exit 1 if the serving path's tau is below this.")]
AccPlot = Annotated[Optional[str], typer.Option("--plot", help="Write per-position acceptance bars as PNG here.")]
FmtTrainTemplate = Annotated[
    Optional[str],
    typer.Option(
        "--train-template",
        help="With --serve-template: replay the --prompts/--requests conversations rendered the training way and the serving way, side by side (target, a .jinja file or a tokenizer directory).",
    ),
]
FmtServeTemplate = Annotated[
    Optional[str],
    typer.Option(
        "--serve-template",
        help="The chat template the server renders with: target, or the file passed to the server's --chat-template.",
    ),
]
FmtTrainSystemPrompt = Annotated[
    Optional[str],
    typer.Option("--train-system-prompt", help="System prompt the training recipe inserted into conversations without one."),
]
FmtRequests = Annotated[
    Optional[str],
    typer.Option(
        "--requests", help="With the template options: serving requests (OpenAI chat-completions JSON) to replay in both formats."
    ),
]
FmtSeed = Annotated[int, typer.Option("--seed", help="Seed of the bootstrap interval over prompts (prompt-format comparison).")]


@app.command("acceptance")
@guarded
def acceptance_cmd(
    target: OptTarget = None, draft: Draft = None, draft_format: DraftFormat = None, engine: OptEngine = None,
    engine_version: EngineVersion = None, serve_cmd: ServeCmd = None, serve_config: ServeConfigFile = None,
    revision: Revision = None, draft_revision: DraftRevision = None, layer_ids: LayerIds = None,
    train_recipe: TrainRecipe = None, train_dump: TrainDump = None, prompts: Prompts = None,
    num_steps: NumSteps = None, continuation: Continuation = "greedy", max_new_tokens: MaxNewTokens = 128,
    max_tokens: MaxTokens = 512, batch_size: BatchSize = "8", limit: Limit = None, temperature: Temperature = 0.0,
    temperature_mode: TemperatureMode = "sampled", topk: TopK = None, num_draft_tokens: NumDraftTokens = None,
    reference_loop: ReferenceLoop = False, scan: Scan = False, compile_draft: CompileDraft = False,
    min_accept_rate: MinAcceptRate = None,
    min_tau: MinTau = None, plot: AccPlot = None, server_metrics: ServerMetrics = None,
    server_metrics_before: ServerMetricsBefore = None, server_log: ServerLog = None, server_model: ServerModel = None,
    dtype: Dtype = "auto", device: Device = "auto", device_map: DeviceMap = None, max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False, json_out: JsonOut = None, report: ReportDir = None, quiet: Quiet = False,
    train_template: FmtTrainTemplate = None, serve_template: FmtServeTemplate = None,
    train_system_prompt: FmtTrainSystemPrompt = None, requests: FmtRequests = None, seed: FmtSeed = 0,
) -> int:  # fmt: skip
    """Per-position acceptance and draft accuracy under the serving and the training features."""
    a = SimpleNamespace(**locals())  # the options by name, as given
    _preflight(a, skip=RESOLVED_LATER)
    from ..doctor import FormatRequest, acceptance_report

    # read (and reject) server evidence before the model loads
    measured = _server_evidence(server_metrics, server_metrics_before, server_log, server_model)
    r = _resolve_serve(a, need_draft=True)
    setup = _setup(a, r)
    if compile_draft:
        setup.compile_draft()
    opts = _acceptance_options(a, r, setup)
    fmt = None
    if train_template or serve_template or train_system_prompt is not None or requests:
        fmt = FormatRequest(prompts, requests, train_template, serve_template, train_system_prompt, seed)
    with _progress(quiet) as cb:
        rep = acceptance_report(
            setup,
            opts,
            prompts_path=prompts,
            train_dump=train_dump,
            formats=fmt,
            serve=r.serve,
            measured=measured,
            min_accept_rate=min_accept_rate,
            min_tau=min_tau,
            progress=cb,
        )
    r.locate(rep.run.findings)
    _render_acceptance(rep, json_out, report, plot, trust_remote_code)
    return exit_code(rep.run.findings, "error")  # an ACC003 threshold the user set fails too


def _acceptance_options(a: SimpleNamespace, r: _Resolved, setup: Any) -> Any:
    """How to measure: explicit options first, then the launch command's speculative settings."""
    from ..doctor import AcceptanceOptions, options_from_serve

    num_steps, topk, num_draft_tokens = options_from_serve(r.serve, a.num_steps, a.topk, a.num_draft_tokens)
    return AcceptanceOptions(
        num_steps=num_steps,
        continuation=a.continuation,
        max_new_tokens=a.max_new_tokens,
        max_tokens=a.max_tokens,
        batch_size=_batch_size(a.batch_size, setup, a.max_tokens + a.max_new_tokens),
        temperature=a.temperature,
        temp_mode=a.temperature_mode,
        topk=topk,
        num_draft_tokens=num_draft_tokens,
        reference=a.reference_loop,
        scan=a.scan,
        limit=a.limit,
        token_tree=r.serve.token_tree if r.serve is not None else None,
    )


def _server_evidence(metrics: Optional[str], before: Optional[str], log: Optional[str], model: Optional[str]) -> Any:
    if not (metrics or before or log):
        return None
    from ..analyses.server_metrics import load_measured

    return load_measured(metrics, before, log, engine=None, model=model)


def _render_acceptance(
    rep: Any, json_out: Optional[str], report: Optional[str], plot: Optional[str], trust_remote_code: bool
) -> None:
    from ..report.render import render_acceptance

    run = rep.run
    con = _console(stderr=json_out == "-")
    render_acceptance(con, run)
    if rep.server is not None:
        from ..analyses.server_metrics import render_comparison

        render_comparison(con, rep.server)
    if rep.formats is not None:
        from ..report.templates import render_format_table

        render_format_table(con, rep.formats)
    _write_json(json_out, rep.to_dict(), trust_remote_code)
    if plot or report:
        from ..report.render import write_acceptance_report

        write_acceptance_report(run, report, plot)
    if run.reference is not None and not run.reference.agrees_with_estimator:
        _console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)


SpeedSettings = Annotated[
    Optional[str],
    typer.Option(
        "--settings",
        help="Settings to predict: K for a chain of K draft tokens, STEPS/TOPK/DRAFT_TOKENS for an SGLang tree, comma-separated (default: chains 1..7, and three SGLang trees with --engine sglang).",
    ),
]
BatchSizes = Annotated[
    str, typer.Option("--batch-sizes", help="Batch sizes (concurrent sequences) to time and predict at, e.g. 1,8.")
]
SpeedContext = Annotated[
    Optional[int],
    typer.Option(
        "--context", help="KV cache positions the timed forwards attend to (default: the mean position a verify pass sees)."
    ),
]
Repeats = Annotated[int, typer.Option("--repeats", help="Timed runs of every forward (the median is used).")]
SpeedLoop = Annotated[
    bool,
    typer.Option(
        "--loop",
        help="Also time a real speculative decode loop (batch 1, greedy, exact) at every other chain setting and the current one.",
    ),
]


@app.command("speedup")
@guarded
def speedup_cmd(
    target: OptTarget = None, draft: Draft = None, draft_format: DraftFormat = None, engine: OptEngine = None,
    engine_version: EngineVersion = None, serve_cmd: ServeCmd = None, serve_config: ServeConfigFile = None,
    revision: Revision = None, draft_revision: DraftRevision = None, layer_ids: LayerIds = None,
    prompts: Prompts = None, settings: SpeedSettings = None, batch_sizes: BatchSizes = "1",
    context: SpeedContext = None, repeats: Repeats = 5, loop: SpeedLoop = False,
    max_new_tokens: MaxNewTokens = 128, max_tokens: MaxTokens = 512, batch_size: BatchSize = "8", limit: Limit = None,
    dtype: Dtype = "auto", device: Device = "auto", device_map: DeviceMap = None, max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False, json_out: JsonOut = None, quiet: Quiet = False,
) -> int:  # fmt: skip
    """Predicted tokens per second per speculative setting, the best setting, and the speedup over plain decoding."""
    a = SimpleNamespace(**locals(), continuation="greedy")  # greedy: --max-new-tokens 0 is refused up front
    _preflight(a, skip=RESOLVED_LATER)
    from ..analyses.speedup import predict_speedup
    from ..report.speedup import render_speedup

    r = _resolve_serve(a, need_draft=True)
    setup = _setup(a, r)
    opts = _speedup_options(a, r, setup)
    with _progress(quiet) as cb:
        res = predict_speedup(setup, opts, prompts_path=prompts, progress=cb)
    render_speedup(_console(stderr=json_out == "-"), res)
    _write_json(json_out, res.to_dict(), trust_remote_code)
    return EXIT_OK


def _speedup_options(a: SimpleNamespace, r: _Resolved, setup: Any) -> Any:
    """The grid (--settings, else the engine's default grid), the launch command's setting, the loop's settings."""
    from ..analyses.speedup import SpeedupOptions
    from ..engines.spec_settings import current_setting, default_grid, parse_batch_sizes, parse_settings

    grid = parse_settings(a.settings) or default_grid(r.engine)
    current, note = current_setting(r.serve, r.engine)
    if note:
        setup.notes.append(note)
    # the loop times the current chain and a spread of chains, so a ranking can be checked, not one point
    loop = [c for c in grid if c.kind == "chain"][::2] + ([current] if current and current.kind == "chain" else [])
    return SpeedupOptions(
        settings=grid,
        batch_sizes=parse_batch_sizes(a.batch_sizes),
        current=current,
        context=a.context,
        repeats=a.repeats,
        max_new_tokens=a.max_new_tokens,
        max_tokens=a.max_tokens,
        batch_size=_batch_size(a.batch_size, setup, a.max_tokens + a.max_new_tokens),
        limit=a.limit,
        loop=list(dict.fromkeys(loop)) if a.loop else (),
    )


@app.command("diagnose")
@guarded
def diagnose_cmd(
    target: OptTarget = None, draft: Draft = None, draft_format: DraftFormat = None, engine: OptEngine = None,
    engine_version: EngineVersion = None, serve_cmd: ServeCmd = None, serve_config: ServeConfigFile = None,
    revision: Revision = None, draft_revision: DraftRevision = None, layer_ids: LayerIds = None,
    train_recipe: TrainRecipe = None, prompts: Prompts = None,
    num_steps: NumSteps = None, continuation: Continuation = "greedy", max_new_tokens: MaxNewTokens = 128,
    max_tokens: MaxTokens = 512, batch_size: BatchSize = "8", limit: Limit = None,
    dtype: Dtype = "auto", device: Device = "auto", device_map: DeviceMap = None, max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False, json_out: JsonOut = None, report: ReportDir = None, quiet: Quiet = False,
) -> int:  # fmt: skip
    """Where the acceptance gap lives, measured: levers set back to training, module ablation, context."""
    a = SimpleNamespace(**locals(), temperature=0.0, temperature_mode="sampled", topk=None, num_draft_tokens=None)
    a.reference_loop = a.scan = False
    _preflight(a, skip=RESOLVED_LATER)
    from ..analyses.attribution import diagnose_gap
    from ..report.diagnosis import render_diagnosis

    r = _resolve_serve(a, need_draft=True)
    setup = _setup(a, r)
    opts = _acceptance_options(a, r, setup)
    with _progress(quiet) as cb:
        d = diagnose_gap(setup, opts, prompts_path=prompts, progress=cb)
    r.locate(d.findings)
    render_diagnosis(_console(stderr=json_out == "-"), d)
    from ..analyses.attribution import SCHEMA

    _write_json(json_out, {"schema": SCHEMA, **d.to_dict()}, trust_remote_code)
    if report:
        from ..report.render import write_diagnosis_report

        write_diagnosis_report(d, report)
    return exit_code(d.findings, "error")


@app.command("fix")
@guarded
def fix_cmd(
    out: Annotated[str, typer.Option("--out", "-o", help="New directory for the corrected copy of the draft (must not exist).")],
    target: OptTarget = None, draft: Draft = None, draft_format: DraftFormat = None, engine: OptEngine = None,
    engine_version: EngineVersion = None, serve_cmd: ServeCmd = None, serve_config: ServeConfigFile = None,
    revision: Revision = None, draft_revision: DraftRevision = None,
    train_recipe: TrainRecipe = None, prompts: Prompts = None,
    num_steps: NumSteps = None, continuation: Continuation = "greedy", max_new_tokens: MaxNewTokens = 128,
    max_tokens: MaxTokens = 512, batch_size: BatchSize = "8", limit: Limit = None,
    dtype: Dtype = "auto", device: Device = "auto", device_map: DeviceMap = None, max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False, json_out: JsonOut = None, quiet: Quiet = False,
) -> int:  # fmt: skip
    """Write a corrected copy of the draft (config edits the findings carry) and measure what it recovers."""
    a = SimpleNamespace(**locals(), temperature=0.0, temperature_mode="sampled", topk=None, num_draft_tokens=None)
    a.reference_loop = a.scan = False
    a.layer_ids = None  # the edits go into the copy's config; an override would hide them
    _preflight(a, skip=RESOLVED_LATER)
    from ..analyses.fixing import check_out, fix_draft
    from ..report.diagnosis import render_fix

    r = _resolve_serve(a, need_draft=True)
    check_out(out, r.draft)
    setup = _setup(a, r)
    opts = _acceptance_options(a, r, setup)
    with _progress(quiet) as cb:
        res = fix_draft(setup, opts, out, prompts_path=prompts, draft_format=draft_format, train_recipe=train_recipe, progress=cb)
    locate(res.findings, r.paths)
    render_fix(_console(stderr=json_out == "-"), res)
    from ..analyses.fixing import SCHEMA

    _write_json(json_out, {"schema": SCHEMA, **res.to_dict()}, trust_remote_code)
    return exit_code(res.findings, "error")


@app.command("explain")
@guarded
def explain_cmd(
    code: Annotated[Optional[str], typer.Argument(help="A finding code, e.g. CAP002 (any case). Leave out to list every code.")] = None,
) -> int:  # fmt: skip
    """The long form of a finding code: what it means, why acceptance drops, how to confirm it."""
    from ..core.explanations import explain, list_codes

    text = explain(code) if code is not None else list_codes()
    print(text, end="")
    return EXIT_OK


@app.command("server-metrics")
@guarded
def server_metrics_cmd(
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="Prometheus scrape (vLLM or SGLang /metrics) as a file or http(s) URL.")] = None,
    before: Annotated[Optional[str], typer.Option("--before", help="A scrape taken before the workload: figures become after minus before.")] = None,
    log: ServerLog = None,
    engine: Annotated[str, typer.Option("--engine", "-e", help="auto, vllm or sglang (checked against the scrape).")] = "auto",
    model: ServerModel = None,
    json_out: JsonOut = None,
) -> int:  # fmt: skip
    """What the live server measured: acceptance from its spec-decode counters. No model is loaded."""
    from .validate import preflight_no_model

    preflight_no_model(**{k: v for k, v in locals().items() if k != "engine"})  # auto|vllm|sglang: checked by the reader
    from ..analyses.server_metrics import load_measured, render_measured

    m = load_measured(metrics, before, log, engine=engine, model=model)
    render_measured(_console(), m)
    _write_json(json_out, m.to_dict(), False)
    return EXIT_OK


@app.command("gate")
@guarded
def gate_cmd(
    target: Target,
    draft: Annotated[str, typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint to gate: local directory or hub id.")],
    policy: Annotated[Optional[str], typer.Option("--policy", help="TOML policy file ([gate] table); flags override it.")] = None,
    train_recipe: TrainRecipe = None, train_dump: TrainDump = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="gate JSON of an earlier checkpoint: fail on regression beyond max_regression.")] = None,
    engine: Annotated[Optional[str], typer.Option("--engine", "-e", metavar="[" + "|".join(ENGINE_CHOICES) + "]", help="Serving engine, any case (policy default: sglang).")] = None,
    engine_version: EngineVersion = None, draft_format: DraftFormat = None, prompts: Prompts = None,
    min_cosine: Annotated[Optional[float], typer.Option("--min-cosine", help="Minimum mean cosine of every serving slot vs its training slot.")] = None,
    min_step1_accuracy: Annotated[Optional[float], typer.Option("--min-step1-accuracy", help="Minimum step-1 draft accuracy on the serving features.")] = None,
    min_tau: Annotated[Optional[float], typer.Option("--min-tau", help="Minimum tau on the serving features.")] = None,
    max_regression: Annotated[Optional[float], typer.Option("--max-regression", help="Allowed absolute drop vs --baseline.")] = None,
    fail_on: Annotated[Optional[str], typer.Option("--fail-on", help="Findings at or above this severity fail: error, warning or info.")] = None,
    limit: Limit = None, dtype: Dtype = "auto", device: Device = "auto", trust_remote_code: TrustRemote = False,
    json_out: JsonOut = None,
    summary: Annotated[Optional[str], typer.Option("--summary", help="Write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set).")] = None,
) -> int:  # fmt: skip
    """CI gate: inspect + compare-hidden + acceptance under one policy. Exit 0 pass, 1 fail, 2 bad input."""
    a = SimpleNamespace(**locals())  # the options by name, as given
    _preflight(a, skip=RESOLVED_LATER)
    from ..io.hub import role_paths
    from ..report.render import render_gate
    from .gate import Policy, markdown, run_gate, write_summary
    from .validate import check_policy_values

    flags = {k: getattr(a, k) for k in ("engine_version", "min_cosine", "min_step1_accuracy", "min_tau", "max_regression")}
    pol = Policy.load(policy, {"engine": engine.lower() if engine else engine, **flags, "fail_on": fail_on, "limit": limit})
    check_policy_values(pol, f"policy file {policy}" if policy else "gate options")
    target_dir, draft_dir = _resolve_models(target, draft, draft_format)
    res = run_gate(
        target=target_dir,
        draft=draft_dir,
        policy=pol,
        prompts=prompts,
        baseline=baseline,
        dtype=dtype,
        device=device,
        draft_format=draft_format,
        trust_remote_code=trust_remote_code,
        train_recipe=train_recipe,
        train_dump=train_dump,
    )
    locate(res.findings, role_paths(target, draft, target_dir=target_dir, draft_dir=draft_dir))
    text = markdown(res, draft)
    con = _console(stderr=json_out == "-")
    render_gate(con, res)
    if os.environ.get("GITHUB_ACTIONS") == "true":  # annotations on the PR, at the config key to change
        from .gate import github_annotations

        for line in github_annotations(res, draft):
            print(line, flush=True)
    write_summary(text, summary)
    _write_json(json_out, res.to_dict(), trust_remote_code)
    return exit_code(res.findings, pol.fail_on, passed=res.passed)


@app.command("fingerprint")
@guarded
def fingerprint_cmd(
    target: Target,
    draft: RequiredDraft,
    draft_format: DraftFormat = None,
    engine: Engine = "sglang",
    engine_version: EngineVersion = None,
    layer_ids: LayerIds = None,
    train_recipe: TrainRecipe = None,
    prompts: Prompts = None,
    limit: Limit = None,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="Teacher-forced draft steps scored (the fixtures were trained with 3).")] = 3,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Target greedy tokens appended to each prompt before scoring.")] = 64,
    dtype: Dtype = "auto",
    device: Device = "auto",
    trust_remote_code: TrustRemote = False,
    json_out: JsonOut = None,
    quiet: Quiet = False,
) -> int:  # fmt: skip
    """Which capture points was the draft trained on? Ranked from the draft's weights and the target alone."""
    a = SimpleNamespace(**locals())  # the options by name, as given
    _preflight(a, skip=RESOLVED_LATER)
    from ..analyses.fingerprint import fingerprint, render_fingerprint

    setup = _setup(a, _resolve_serve(a, need_draft=True))
    with _progress(quiet) as cb:
        fp = fingerprint(
            setup, prompts_path=prompts, num_steps=num_steps, max_new_tokens=max_new_tokens, limit=limit, progress=cb
        )
    render_fingerprint(_console(), fp)
    _write_json(json_out, fp.to_dict(), trust_remote_code)
    from .gate import fingerprint_findings

    # FPR001 (an error) is the determined fingerprint ranking the configured capture points below the best
    return exit_code(fingerprint_findings(fp, setup), "error")


# ----------------------------------------------------------------------------- prompt format (issue 15)
TrainTemplate = Annotated[
    Optional[str],
    typer.Option(
        "--train-template",
        help="Chat template the draft's training data was rendered with: target (the target tokenizer's own), a .jinja file, a tokenizer_config.json or a tokenizer directory. Default: target.",
    ),
]
ServeTemplate = Annotated[
    Optional[str],
    typer.Option(
        "--serve-template",
        help="Chat template the server renders with: target, or the file passed to the server's --chat-template. Default: target.",
    ),
]
TrainSystemPrompt = Annotated[
    Optional[str],
    typer.Option(
        "--train-system-prompt",
        help="System prompt the training recipe inserted into conversations without one (SpecForge's --chat-template NAME does).",
    ),
]
TrainAddSpecial = Annotated[
    bool,
    typer.Option(
        "--train-add-special-tokens",
        help="Training tokenized the rendered text with add_special_tokens=True (a BOS on top of the template's).",
    ),
]
TrainKwargs = Annotated[
    Optional[str],
    typer.Option(
        "--train-template-kwargs", help="JSON template variables training rendered with, e.g. '{\"enable_thinking\": false}'."
    ),
]
ServeKwargs = Annotated[
    Optional[str],
    typer.Option("--serve-template-kwargs", help="JSON template variables the server renders with (chat_template_kwargs)."),
]


@app.command("template-diff")
@guarded
def template_diff_cmd(
    target: Target,
    train_template: TrainTemplate = None,
    serve_template: ServeTemplate = None,
    train_system_prompt: TrainSystemPrompt = None,
    train_add_special_tokens: TrainAddSpecial = False,
    train_template_kwargs: TrainKwargs = None,
    serve_template_kwargs: ServeKwargs = None,
    train_data: Annotated[Optional[str], typer.Option("--train-data", help="Training data: JSONL of OpenAI messages, ShareGPT or SpecForge conversations, or input_ids/loss_mask rows.")] = None,
    requests: Annotated[Optional[str], typer.Option("--requests", help="Serving requests: OpenAI chat-completions JSON (object, array or JSONL).")] = None,
    prompts: Prompts = None,
    limit: Limit = None,
    train_tokenizer: Annotated[Optional[str], typer.Option("--train-tokenizer", help="Tokenizer directory the draft's training data was made with: compared with the target's (vocabulary hash, special and added tokens, BOS/EOS).")] = None,
    write_template: Annotated[Optional[str], typer.Option("--write-template", help="Write the training chat template to this file (to pass to the server's --chat-template).")] = None,
    json_out: JsonOut = None,
) -> int:  # fmt: skip
    """Render the same conversations the training way and the serving way; report the first differing tokens."""
    from .validate import preflight_no_model

    preflight_no_model(**locals())
    from ..analyses.templates import parse_kwargs, template_diff
    from ..report.templates import render_template_diff

    res = template_diff(
        target,
        train_template=train_template,
        serve_template=serve_template,
        train_system_prompt=train_system_prompt,
        train_add_special_tokens=train_add_special_tokens,
        train_kwargs=parse_kwargs(train_template_kwargs, "--train-template-kwargs"),
        serve_kwargs=parse_kwargs(serve_template_kwargs, "--serve-template-kwargs"),
        train_data=train_data,
        requests=requests,
        prompts=prompts,
        limit=limit,
        train_tokenizer=train_tokenizer,
    )
    if write_template:
        from ..io.safeio import write_output

        write_output(write_template, res.train.text.encode("utf-8"))
        for f in res.findings:
            if f.fix and "write the training template to a file" in f.fix:
                from ..analyses.templates import written_template_fix

                f.fix = written_template_fix(write_template)
                f.location = f.fix.location
    render_template_diff(_console(), res)
    _write_json(json_out, res.to_dict(), False)
    return exit_code(res.findings, "warning")


def run() -> None:
    """Console-script entry point."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app(prog_name="eagle3-doctor")


if __name__ == "__main__":
    run()
