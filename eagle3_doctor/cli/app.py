"""eagle3-doctor command line: the typer app, its error boundary, and the commands registered under it.

Each command lives in cli/commands/ (its options in cli/options.py); this module only wires them in.
torch and transformers are imported inside the commands so ``--help`` answers at once.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import typer

from .. import __version__
from ..core.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    DoctorError,
)
from ..io.outputs import remove_staged  # the signal handler's cleanup: imported before it can be needed
from .commands import (
    acceptance,
    compare_hidden,
    diagnose,
    explain,
    fingerprint,
    fix,
    gate,
    inspect,
    server_metrics,
    speedup,
    template_diff,
)
from .help import FirstCommandsGroup, PanelCommand
from .options import VERSION, options
from .output import fail, flush_stdout, silence_stdout
from .usage import click_exceptions


class _OneLineGroup(FirstCommandsGroup):
    """Click's own errors (unknown option, missing --target, --limit two) as the one promised line.

    Click would print a three-line usage block; here every way out of the program is one line
    on stderr and an exit code: 0 ok, 1 findings, 2 bad input, 3 a bug, 130/143 interrupted.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,  # click's own parameter and default, passed on
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(
                args, prog_name, complete_var, standalone_mode=False, windows_expand_args=windows_expand_args, **extra
            )
        cx = click_exceptions()
        # started with stdout or stderr closed (`>&-`): Python sets them to None; write into the void
        if sys.stdout is None:
            sys.stdout = open(os.devnull, "w")
        if sys.stderr is None:
            sys.stderr = open(os.devnull, "w")
        try:
            rv = super().main(
                args, prog_name, complete_var, standalone_mode=False, windows_expand_args=windows_expand_args, **extra
            )
            flush_stdout()
        except getattr(cx, "NoArgsIsHelpError", ()) as e:  # bare `eagle3-doctor`: the help is the answer
            try:
                print(e.ctx.get_help(), flush=True)
            except BrokenPipeError:
                silence_stdout()
            except OSError as err:
                sys.exit(_environment_exit(err))
            sys.exit(EXIT_OK)
        except BrokenPipeError:  # `--help | head`: the reader had what it wanted
            silence_stdout()
            sys.exit(EXIT_OK)
        except OSError as e:  # `--help > /dev/full`: the disk refused, not the tool
            sys.exit(_environment_exit(e))
        except cx.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "eagle3-doctor"
            fail(f"error: {e.format_message()} -- fix: see `{cmd} --help`")
            sys.exit(EXIT_BAD_INPUT)
        except cx.ClickException as e:
            fail(f"error: {e.format_message()} -- fix: see `eagle3-doctor --help`")
            sys.exit(EXIT_BAD_INPUT)
        except (typer.Abort, getattr(cx, "Abort", typer.Abort)):
            fail("interrupted: no report was written")
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


app = typer.Typer(
    cls=_OneLineGroup,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    help="Find out why an EAGLE-3 draft accepts fewer tokens in serving than it did in training.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts contain brackets ([gate], specforge[:ids]) that are not markup
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so it unwinds like Ctrl-C: temp files removed, old reports kept."""


_owns_process = False  # set by run(): a host process (tests, a library caller) keeps the unwinding handlers


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _exit_at_once(signum: int, frame: Any) -> None:
    """The console's handler while a command runs. An exception raised into whatever the main thread
    is doing can break the promise: inside an import transformers turns it into a ModuleNotFoundError
    (exit 3), numpy's import can end in a RecursionError, and torch's C++ calling back into Python can
    abort. So nothing is raised: the temporaries a write has staged are removed, the one line written
    straight to the descriptor, and the process ends with the shell's code. Buffered stdout is dropped
    with it, which is what "no report was written" says."""
    from .signals import exit_with_signal

    remove_staged()
    exit_with_signal(signum, ": no report was written")


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
    from ..io.outputs import write_fault

    name = getattr(e, "filename", None)
    # safeio names the files it writes itself; a fault without a file name is stdout's final flush
    err = write_fault(e, name or "standard output", "cannot write" if name is None else "cannot use")
    if err is None:
        return
    if name is None:
        silence_stdout()  # what is still buffered for stdout would fail again at exit
    fail(f"error: {err}")
    raise typer.Exit(EXIT_BAD_INPUT) from None


def _after_command(old: Any, old_int: Any) -> None:
    """The command has ended and said what it had to: in the console's own process the rest is the
    interpreter's teardown (a second or more with torch loaded), in which Python puts SIGINT and SIGTERM
    back to their defaults, so a signal there killed the process silently and turned a finished run's
    exit code into 130. From here on a signal changes nothing, so it is ignored. A host process gets its
    own handlers back."""
    if _owns_process:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return
    if old is not None:
        signal.signal(signal.SIGTERM, old)
    if old_int is not None:
        signal.signal(signal.SIGINT, old_int)


def _take_signals() -> tuple[Any, Any]:
    """SIGTERM's and SIGINT's handlers for the command (from the main thread only); the old ones back."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None, None
    if _owns_process:
        return signal.signal(signal.SIGTERM, _exit_at_once), signal.signal(signal.SIGINT, _exit_at_once)
    # in a host process Ctrl-C unwinds as KeyboardInterrupt: the host decides what happens next
    return signal.signal(signal.SIGTERM, _on_sigterm), signal.signal(signal.SIGINT, signal.default_int_handler)


def guarded(fn: Callable[..., int]) -> Callable[..., None]:
    """The one error boundary: whatever escapes a command becomes one line on stderr and an exit code.

    Bad input (DoctorError) exits 2 with a fix; an exception nobody anticipated is a bug and exits 3
    (never 1, which CI reads as findings), naming the version and the file holding the traceback.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        old, old_int = _take_signals()
        try:
            code = fn(*args, **kwargs)
            flush_stdout()  # a full disk or closed pipe under stdout surfaces here, not after exit
        except DoctorError as e:
            fail(f"error: {e}")
            raise typer.Exit(e.exit_code) from None
        except Terminated:
            fail("terminated (SIGTERM): no report was written")
            raise typer.Exit(EXIT_TERMINATED) from None
        except KeyboardInterrupt:
            fail("interrupted: no report was written")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except MemoryError:
            fail("error: out of host memory -- fix: lower --batch-size or --max-tokens")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (typer.Exit, SystemExit, click_exceptions().ClickException):
            raise  # usage errors raised inside a command get click's one-line form from _OneLineGroup
        except BrokenPipeError:
            silence_stdout()
            fail(
                "error: standard output was closed before the results were written -- fix: keep the reader "
                "open (e.g. pipe into `less`, not `head`) or write --json FILE"
            )
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Exception as e:
            _exit_if_environment(e)
            if type(e).__name__ == "OutOfMemoryError":  # torch.cuda.OutOfMemoryError, without importing torch
                fail("error: CUDA out of memory -- fix: halve --batch-size (or use --batch-size auto)")
                raise typer.Exit(EXIT_BAD_INPUT) from None
            asked = _cpu_allocation_refused(e)
            if asked is not None:  # torch's CPU allocator says it as a RuntimeError: the machine's limit, not a bug
                fail(
                    f"error: out of host memory: the run asked for {asked} at once -- fix: lower --batch-size, "
                    "--batch-sizes, --context or --max-tokens"
                )
                raise typer.Exit(EXIT_BAD_INPUT) from None
            where = _report_bug(e)
            fail(
                f"bug: {type(e).__name__}: {str(e)[:200]} (eagle3-doctor {__version__}); this is a bug in "
                f"eagle3-doctor, not in your input; full traceback in {where}; please report it with that file"
            )
            raise typer.Exit(EXIT_BUG) from None
        finally:
            _after_command(old, old_int)
        raise typer.Exit(code)

    return wrapper


def _cpu_allocation_refused(e: BaseException) -> str | None:
    """The size torch's CPU allocator refused ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N
    bytes"), in GiB, or None when ``e`` is not that refusal."""
    import re

    m = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes", str(e))
    if not isinstance(e, RuntimeError) or "DefaultCPUAllocator" not in str(e):
        return None
    return f"{int(m.group(1)) / 2**30:,.0f} GiB" if m else "more than the machine has"


@app.callback(invoke_without_command=True)
@options(version=VERSION)
def main(**given: Any) -> None:
    if given["version"]:
        print(f"eagle3-doctor {__version__}")
        raise typer.Exit(EXIT_OK)


# the commands, in the order --help lists them
COMMANDS: tuple[tuple[str, Callable[..., int]], ...] = (
    ("inspect", inspect.inspect_cmd),
    ("compare-hidden", compare_hidden.compare_hidden_cmd),
    ("acceptance", acceptance.acceptance_cmd),
    ("speedup", speedup.speedup_cmd),
    ("diagnose", diagnose.diagnose_cmd),
    ("fix", fix.fix_cmd),
    ("explain", explain.explain_cmd),
    ("server-metrics", server_metrics.server_metrics_cmd),
    ("gate", gate.gate_cmd),
    ("fingerprint", fingerprint.fingerprint_cmd),
    ("template-diff", template_diff.template_diff_cmd),
)
for _name, _cmd in COMMANDS:
    app.command(_name, cls=PanelCommand)(guarded(_cmd))


def allocator_default(environ: MutableMapping[str, str], platform: str) -> None:
    """The CUDA allocator in growable segments unless the user configured it: memory a long prompt's prefill or an
    earlier batch freed goes to what comes after instead of staying cut into blocks of its old sizes (4 x 32k prompt
    tokens: peak 61.6 -> 58.3 GB, bench/RESULTS.md 2026-12-05). Linux only, where torch supports it."""
    if platform.startswith("linux") and not {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"} & set(environ):
        environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"


def run() -> None:
    """Console-script entry point: the process is the command's, to end at once on a signal."""
    global _owns_process
    _owns_process = True
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    allocator_default(os.environ, sys.platform)  # before torch's allocator starts, on the command's first tensor
    app(prog_name="eagle3-doctor")


if __name__ == "__main__":
    run()
