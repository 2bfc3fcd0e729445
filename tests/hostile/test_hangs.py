"""Every hang class a hostile input once caused returns within 10 s, in one line and with exit 2: a FIFO
where a file belongs, YAML "billion laughs", absurd numbers in a launch command, a 2^63 layer count in
a dump vs dump, a log crafted to make the scan quadratic, a metrics URL that trickles, never answers
or never ends, and a chat template of nested loops.

Each case runs as a real process (``python -m eagle3_doctor`` of this checkout), the way a user meets
it, under a 10 s limit; a run past it is the hang the case exists to catch.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DRAFTS, FIX, ROOT, TARGET, invoke

D = DRAFTS["sglang"]
HANG_SECONDS = 10
FIFO = "named pipe (FIFO), not a regular file"
SGLANG = "python -m sglang.launch_server --model-path {t} --speculative-algorithm EAGLE3 --speculative-draft-model-path {d} "


def run_cli(args: list, timeout: float = HANG_SECONDS) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor", *map(str, args)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )
    return r, time.monotonic() - t0


def one_line(r: subprocess.CompletedProcess, needle: str, code: int = 2) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"exit {r.returncode}, stderr:\n{r.stderr[-3000:]}"
    assert r.returncode == code, (r.returncode, lines[0])
    assert lines[0].startswith("eagle3-doctor: error: ") and " -- fix: " in lines[0], lines[0]
    assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ----------------------------------------------------------------------------- files and launch commands


def _laughs(levels: int = 9, fan: int = 9) -> str:
    lines = ["a0: &a0 [lol]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _crafted_log() -> str:
    """8 MiB of one line on which the old pattern (three lazy gaps between four literals) tried every
    pair of later literals from every "Decode batch": cubic in the line's length."""
    unit = "Decode batch #running-req: 1 accept len: 2 "
    return unit * ((8 << 20) // len(unit))


def _vllm(spec: dict) -> str:
    return f"vllm serve {TARGET} --speculative-config '{json.dumps({'method': 'eagle3', 'model': str(D), **spec})}'"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hangs")
    os.mkfifo(root / "serve.yaml")
    target = root / "target-fifo-config"
    target.mkdir()
    for f in TARGET.iterdir():
        if f.name != "config.json":
            (target / f.name).symlink_to(f)
    os.mkfifo(target / "config.json")
    (root / "laughs.yaml").write_text(_laughs())
    (root / "crafted.log").write_text(_crafted_log())
    return root


@dataclass
class Hang:
    id: str
    args: Callable[[Path], list]
    needle: str


def acceptance_cmd(extra: str) -> Callable[[Path], list]:
    return lambda _: ["acceptance", "--serve-cmd", SGLANG.format(t=TARGET, d=D) + extra, "-q"]


HANGS = [
    Hang("fifo-serve-config", lambda p: ["inspect", "--target", TARGET, "--draft", D, "--serve-config", p / "serve.yaml"], FIFO),
    Hang("fifo-target-config-json", lambda p: ["inspect", "--target", p / "target-fifo-config", "--draft", D], FIFO),
    Hang(
        "yaml-billion-laughs",
        lambda p: ["inspect", "--target", TARGET, "--draft", D, "--serve-config", p / "laughs.yaml"],
        "more than 20 YAML aliases",
    ),
    Hang(
        "serve-cmd-num-steps-100000",
        acceptance_cmd("--speculative-num-steps 100000"),
        "--speculative-num-steps 100000 is out of range",
    ),
    Hang(
        "serve-cmd-topk-100000",
        acceptance_cmd("--speculative-num-steps 3 --speculative-eagle-topk 100000 --speculative-num-draft-tokens 8"),
        "--speculative-eagle-topk 100000 is out of range",
    ),
    Hang(
        "serve-cmd-draft-tokens-10-million",
        acceptance_cmd("--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 10000000"),
        "--speculative-num-draft-tokens 10000000 is out of range",
    ),
    Hang(
        "serve-cmd-num-steps-negative", acceptance_cmd("--speculative-num-steps -3"), "--speculative-num-steps -3 is out of range"
    ),
    Hang(
        "vllm-num-speculative-tokens-100000",
        lambda _: ["speedup", "--serve-cmd", _vllm({"num_speculative_tokens": 100000}), "-q"],
        "num_speculative_tokens 100000 is out of range",
    ),
    Hang(
        "vllm-token-tree-100-deep",
        lambda _: ["acceptance", "--serve-cmd", _vllm({"speculative_token_tree": str([(0,) * n for n in range(1, 101)])}), "-q"],
        "100 deep",
    ),
    Hang(
        "dump-vs-dump-2-to-the-63-layers",
        lambda _: [
            "compare-hidden",
            *("--engine-dump", FIX / "serving" / "sglang-dump-correct", "--train-dump", FIX / "specforge-dump"),
            *("--num-layers", str(2**63), "--draft", D),
        ],
        f"--num-layers {2**63} is out of range",
    ),
    Hang("crafted-sglang-log", lambda p: ["server-metrics", "--server-log", p / "crafted.log"], "has no SGLang 'Decode batch"),
]


@pytest.mark.parametrize("case", HANGS, ids=[c.id for c in HANGS])
def test_a_hang_class_returns_within_10_s_in_one_line(case: Hang, files: Path):
    r, took = run_cli(case.args(files))
    one_line(r, case.needle)
    assert took < HANG_SECONDS


def test_the_launch_command_is_refused_before_torch_is_imported(tmp_path):
    """Range-checked where it is parsed, before the command's heavy imports: no torch in the refusal."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = SGLANG.format(t=TARGET, d=D) + "--speculative-num-steps 100000"
    for command in ("acceptance", "compare-hidden", "speedup", "diagnose", "fix", "inspect"):
        argv = [command, "--serve-cmd", cmd] + (["--out", str(tmp_path / "fixed")] if command == "fix" else [])
        code = f"import sys; sys.argv = ['eagle3-doctor', *{argv!r}]\n"
        code += "from eagle3_doctor.cli.app import run\ntry:\n    run()\nexcept SystemExit as e:\n"
        code += "    print(e.code, 'torch' in sys.modules)\n"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
        assert r.stdout.split() == ["2", "False"], (command, r.stdout, r.stderr[-2000:])
        assert "--speculative-num-steps 100000 is out of range" in r.stderr, (command, r.stderr[-2000:])


# ----------------------------------------------------------------------------- a metrics URL


@dataclass
class Server:
    url: str
    accepted: list[int]


@contextmanager
def _serve(behave: Callable[[socket.socket], None]) -> Iterator[Server]:
    lsock = socket.create_server(("127.0.0.1", 0))
    lsock.settimeout(0.2)
    stop = threading.Event()
    accepted: list[int] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            accepted.append(1)
            threading.Thread(target=_quietly, args=(behave, conn, stop), daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield Server(f"http://127.0.0.1:{lsock.getsockname()[1]}/metrics", accepted)
    finally:
        stop.set()
        t.join()
        lsock.close()


def _quietly(behave: Callable, conn: socket.socket, stop: threading.Event) -> None:
    try:
        conn.recv(65536)  # the request
        behave(conn, stop)
    except OSError:  # the client gave up, as it should
        pass
    finally:
        conn.close()


def _trickle(conn: socket.socket, stop: threading.Event) -> None:
    """Headers at once, then the body one byte a second: each read returns before any per-read timeout."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(1.0):
        conn.sendall(b"#")


def _trickle_headers(conn: socket.socket, stop: threading.Event) -> None:
    """The status line and headers one byte a second: urllib's own reads never time out."""
    for b in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100000:
        if stop.wait(1.0):
            return
        conn.sendall(bytes([b]))


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(60)


def _endless(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")  # no length: the body ends when the socket does
    chunk = b"# padding\n" * 6554
    while not stop.is_set():
        conn.sendall(chunk)


URL_CASES = {
    "trickling-body": (_trickle, "no complete answer within 5 s"),
    "trickling-headers": (_trickle_headers, "no complete answer within 5 s"),
    "never-answers": (_silent, "no complete answer within 5 s"),
    "endless-body": (_endless, "is over 64 MiB"),
}


@pytest.mark.parametrize("kind", sorted(URL_CASES))
def test_a_metrics_url_that_never_finishes_is_one_line_within_10_s(kind):
    behave, needle = URL_CASES[kind]
    with _serve(behave) as server:
        r, took = run_cli(["server-metrics", "--metrics", server.url])
        assert server.accepted, "the command never connected"
        one_line(r, needle)
        assert took < HANG_SECONDS


def test_a_metrics_url_that_answers_is_read_whole():
    """The bounds leave a real scrape alone: the same bytes as the saved file, over HTTP."""
    body = (FIX / "serving" / "vllm-after-healthy.prom").read_bytes()

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    with _serve(answer) as server:
        r, _ = run_cli(["server-metrics", "--metrics", server.url])
        saved, _ = run_cli(["server-metrics", "--metrics", FIX / "serving" / "vllm-after-healthy.prom"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.replace(server.url, "SRC") == saved.stdout.replace(str(FIX / "serving" / "vllm-after-healthy.prom"), "SRC")


# ----------------------------------------------------------------------------- a chat template


def test_a_template_of_nested_loops_returns_within_10_s(tmp_path):
    """10^10 iterations of nested loops, under the real 5 s bound: in-process, with transformers
    imported beforehand, so the 10 s measure the template's run and not this machine's start-up."""
    import transformers  # noqa: F401

    t = tmp_path / "loops.jinja"
    t.write_text("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}")
    requests = FIX / "conversations" / "requests.jsonl"
    t0 = time.monotonic()
    r = invoke("template-diff", "-t", TARGET, "--serve-template", t, "--requests", requests)
    took = time.monotonic() - t0
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "did not finish rendering" in lines[0], r.output[-2000:]
    assert took < HANG_SECONDS
