"""diagnose's live figures, one scrape or one per batch size: ``--server-metrics FILE@N`` (repeatable), read and
refused before torch is imported.

vLLM's and SGLang's scrapes label no batch size, so the user says it: the last '@' of the argument followed by a
whole number only (a file name may hold '@' itself). Counters add up over a server's life, so a scrape taken after
the batch-8 workload holds the batch-1 one too: ``--server-metrics-before FILE@N`` takes the scrape before that
size's workload, paired by N.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..core.errors import BadInput
from ..io.checks import kind, require_file
from .options import opt

if TYPE_CHECKING:
    from ..analyses.faults.batches import BatchProfile

SERVER_METRICS_AT = opt(
    Optional[list[str]],
    None,
    "--server-metrics",
    metavar="FILE[@N]",
    help="The server's Prometheus scrape (vLLM or SGLang /metrics) as a file or http(s) URL, taken after the workload. "
    "Repeat as FILE@N, one scrape per batch size N, to rank the faults that depend on it.",
)
SERVER_METRICS_BEFORE_AT = opt(
    Optional[list[str]],
    None,
    "--server-metrics-before",
    metavar="FILE[@N]",
    help="A scrape taken before the workload: figures become after minus before (FILE@N: before batch size N's).",
)

BATCH_FIX = "write FILE@N, N the number of sequences the server decoded side by side (e.g. after-b8.prom@8)"


def split_batch(text: str, flag: str) -> tuple[str, int | None]:
    """``FILE@N`` -> (FILE, N); an argument whose last '@' is not followed by a whole number is all file name."""
    at = text.rfind("@")
    tail = text[at + 1 :]
    if at < 0 or not (tail.isascii() and tail.isdigit()):
        return text, None
    if int(tail) < 1 or len(tail) > 9:
        raise BadInput(f"{flag} {text}: batch size {tail} is not a number of sequences from 1 to 999999999", BATCH_FIX)
    return text[:at], int(tail)


def _require(given: list[tuple[str, int | None]], flag: str) -> None:
    for path, _ in given:
        if "://" in path:
            continue
        if "@" in path and kind(path) == "missing":  # a suffix that is not a batch size, or a missing file with '@'
            raise BadInput(f"{flag} {path}: no such file, and '@{path.rsplit('@', 1)[1][:20]}' is not a batch size",
                           BATCH_FIX)  # fmt: skip
        require_file(path, flag, "pass a saved scrape (curl -s http://HOST:PORT/metrics > FILE) or the URL")


def split_evidence(metrics: Optional[list[str]], before: Optional[list[str]]
                   ) -> tuple[list[tuple[str, int | None]], list[tuple[str, int | None]]]:  # fmt: skip
    """Every --server-metrics and --server-metrics-before as (path, batch size or None), each path checked."""
    after = [split_batch(t, "--server-metrics") for t in metrics or []]
    prior = [split_batch(t, "--server-metrics-before") for t in before or []]
    _require(after, "--server-metrics")
    _require(prior, "--server-metrics-before")
    return after, prior


def diagnose_evidence(after: list[tuple[str, int | None]], prior: list[tuple[str, int | None]], log: Optional[str],
                      model: Optional[str]) -> Any:  # fmt: skip
    """One live profile (no batch size named: exactly the one-scrape reading), a list of ``BatchProfile`` sorted by
    batch size, or None where no evidence was given."""
    from .resolve import server_evidence

    if all(n is None for _, n in after + prior):
        for flag, given in (("--server-metrics", after), ("--server-metrics-before", prior)):
            if len(given) > 1:
                raise BadInput(f"{flag} given {len(given)} times, none with a batch size", BATCH_FIX + ", once per size")
        return server_evidence(after[0][0] if after else None, prior[0][0] if prior else None, log, model)
    return _profiles(after, prior, log, model)


def _profiles(after: list[tuple[str, int | None]], prior: list[tuple[str, int | None]], log: Optional[str],
              model: Optional[str]) -> list[BatchProfile]:  # fmt: skip
    from ..analyses.faults.batches import BatchProfile
    from ..analyses.server_metrics.measured import load_measured

    if any(n is None for _, n in after + prior):
        raise BadInput("some --server-metrics/--server-metrics-before name a batch size and some do not", BATCH_FIX)
    if not after:
        raise BadInput("--server-metrics-before needs --server-metrics", "pass the scrape taken after each workload too")
    if log is not None:
        raise BadInput("--server-log holds every batch size's lines in one profile: it does not pair with FILE@N",
                       "drop --server-log, or pass one scrape without a batch size")  # fmt: skip
    sizes = [n for _, n in after]
    for flag, given in (("--server-metrics", after), ("--server-metrics-before", prior)):
        seen = [n for _, n in given]
        if dup := next((n for n in seen if seen.count(n) > 1), None):
            raise BadInput(f"{flag} names batch size {dup} twice", "give one scrape per batch size")
    if orphan := next((n for _, n in prior if n not in sizes), None):
        raise BadInput(f"--server-metrics-before names batch size {orphan}, which no --server-metrics names",
                       "pair each earlier scrape with the later one of the same batch size")  # fmt: skip
    earlier = {n: p for p, n in prior}
    out = [BatchProfile(n, load_measured(p, earlier.get(n), None, engine=None, model=model)) for p, n in after if n]
    if len(engines := {p.measured.engine for p in out}) > 1:
        raise BadInput(f"the scrapes come from different engines ({', '.join(sorted(engines))})",
                       "take every batch size's scrapes from the one server")  # fmt: skip
    ks = {p.measured.num_spec_tokens for p in out if p.measured.num_spec_tokens is not None}
    if len(ks) > 1:
        raise BadInput(f"the scrapes drafted different numbers of tokens a pass ({', '.join(map(str, sorted(ks)))})",
                       "compare batch sizes at one --num-speculative-tokens")  # fmt: skip
    return sorted(out, key=lambda p: p.batch)
