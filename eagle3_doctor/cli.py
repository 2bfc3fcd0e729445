"""eagle3-doctor command line: parse options, call the library, render. Nothing else.

torch and transformers are imported inside the commands so ``--help`` answers at once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from typing import Annotated, Any, Callable, Iterator, Optional

import typer

from . import __version__
from .errors import EXIT_BAD_INPUT, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, DoctorError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find out why an EAGLE-3 draft accepts fewer tokens in serving than it did in training.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts contain brackets ([gate], specforge[:ids]) that are not markup
)

# ----------------------------------------------------------------------------- shared options
Target = Annotated[str, typer.Option("--target", "-t", help="Target model: local directory or hub id.")]
Draft = Annotated[Optional[str], typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint directory.")]
DraftFormat = Annotated[Optional[str], typer.Option("--draft-format", help="Force the draft format: eagle, sglang or speculators (default: detect).")]
Engine = Annotated[str, typer.Option("--engine", "-e", help="Serving engine: sglang, vllm, trtllm, modelopt or eagle.")]
EngineVersion = Annotated[Optional[str], typer.Option("--engine-version", help="Engine version whose rules apply (sglang 0.5.23|0.5.2; vllm 0.33.0|0.33.0-v2|0.18.0|0.10.2).")]
LayerIds = Annotated[Optional[str], typer.Option("--layer-ids", help="Try these serving ids (as the engine's key would hold them) without editing files, e.g. 1,3,4.")]
TrainRecipe = Annotated[Optional[str], typer.Option("--train-recipe", help="How training features were made: hf-hidden-states:I,J,K | eagle-default | specforge[:ids] | speculators[:ids] | modelopt[:ids] | spec:POINTS. Default: what the draft config declares.")]
TrainDump = Annotated[Optional[str], typer.Option("--train-dump", help="Training feature dump: SpecForge rows_*/data_*.ckpt(.gz) directory, or safetensors files.")]
Prompts = Annotated[Optional[str], typer.Option("--prompts", help="JSONL chat messages ({\"messages\": [...]}) or plain text, one prompt per line. Default: built-in prompts.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Truncate each prompt or dump sequence to this many tokens.")]
BatchSize = Annotated[str, typer.Option("--batch-size", help="Sequences per forward, or 'auto' (sized from free GPU memory).")]
Limit = Annotated[Optional[int], typer.Option("--limit", help="Use only the first N prompts or dump files.")]
Dtype = Annotated[str, typer.Option("--dtype", help="auto, bfloat16, float16 or float32.")]
Device = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
DeviceMap = Annotated[Optional[str], typer.Option("--device-map", help="Shard the target: auto, balanced or a JSON device map (needs accelerate).")]
MaxMemory = Annotated[Optional[str], typer.Option("--max-memory", help="With --device-map: memory per device, e.g. 0=70GiB,1=70GiB,cpu=200GiB.")]
TrustRemote = Annotated[bool, typer.Option("--trust-remote-code", help="Allow the target's own modelling code to run (off unless you ask).")]
JsonOut = Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to this path.")]
ReportDir = Annotated[Optional[str], typer.Option("--report", help="Write a Markdown report (with PNG plots if matplotlib is installed) into this directory.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _console(stderr: bool = False):
    from rich.console import Console

    # piped output (CI logs) defaults to 80 columns in rich: too narrow for the slot tables
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=None if wide else 160)


def _fail(line: str) -> None:
    # plain print, not rich: one line must stay one line whatever the terminal width
    print(f"eagle3-doctor: {line}", file=sys.stderr, flush=True)


def guarded(fn: Callable[..., int]) -> Callable[..., None]:
    """Turn library errors into one line and an exit code; never a traceback for bad input."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except DoctorError as e:
            _fail(f"error: {e}")
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            _fail("interrupted: no report was written")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except MemoryError:
            _fail("error: out of host memory -- fix: lower --batch-size or --max-tokens")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except Exception as e:  # torch's OOM and friends, mapped when recognisable
            name = type(e).__name__
            if name == "OutOfMemoryError":
                _fail("error: CUDA out of memory -- fix: halve --batch-size (or use --batch-size auto)")
                raise typer.Exit(EXIT_BAD_INPUT) from None
            raise
        raise typer.Exit(code)

    return wrapper


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Yield a progress callback (label, done, total): rich bars on a terminal, a no-op otherwise."""
    if quiet or not sys.stderr.isatty():
        yield lambda *_: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=_console(stderr=True), transient=True)
    tasks: dict[str, Any] = {}

    def cb(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = prog.add_task(label, total=total)
        prog.update(tasks[label], completed=done, total=total)

    with prog:
        yield cb


def _setup(target: str, draft: Optional[str], draft_format: Optional[str], engine: str, engine_version: Optional[str],
           layer_ids: Optional[str], train_recipe: Optional[str], dtype: str, device: str, trust_remote_code: bool,
           device_map: Optional[str], max_memory: Optional[str]):
    from .doctor import load_setup

    return load_setup(target=target, draft=draft, draft_format=draft_format, engine=engine, engine_version=engine_version,
                      layer_ids=layer_ids, train_recipe=train_recipe, dtype=dtype, device=device,
                      trust_remote_code=trust_remote_code, device_map=_device_map(device_map),
                      max_memory=_max_memory(max_memory))


def _write_json(path: Optional[str], data: dict, trust_remote_code: bool) -> None:
    if path:
        from .report import write_json

        write_json(path, {**data, "trust_remote_code": trust_remote_code})


def _batch_size(text: str, setup: Any, max_tokens: int) -> int:
    from .errors import BadInput

    if text == "auto":
        from .runtime import auto_batch_size

        return auto_batch_size(setup.target, max_tokens)
    try:
        n = int(text)
    except ValueError:
        raise BadInput(f"--batch-size {text!r} is not a number", "use a positive integer or auto") from None
    if n < 1:
        raise BadInput("--batch-size must be at least 1", "use a positive integer or auto")
    return n


def _max_memory(text: Optional[str]):
    if text is None:
        return None
    from .errors import BadInput

    out: dict = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        if not sep or not val.strip():
            raise BadInput(f"--max-memory entry {part!r} is not DEVICE=SIZE", "write e.g. 0=70GiB,1=70GiB,cpu=200GiB")
        key = key.strip()
        out[int(key) if key.isdigit() else key] = val.strip()
    return out


def _device_map(text: Optional[str]):
    if text is None:
        return None
    if text.strip().startswith("{"):
        import json

        from .errors import BadInput

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
    target: Target,
    draft: Annotated[str, typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint directory.")],
    draft_format: DraftFormat = None,
    engine: Engine = "sglang",
    engine_version: EngineVersion = None,
    json_out: JsonOut = None,
    report: ReportDir = None,
) -> int:
    """Audit the draft checkpoint and config against the target and engine. No forward pass."""
    from .inspect_draft import inspect
    from .report import render_inspect, write_json

    res = inspect(target, draft, engine=engine, engine_version=engine_version, draft_format=draft_format)
    render_inspect(_console(), res)
    if json_out:
        write_json(json_out, res.to_dict())
    if report:
        from .plots import write_inspect_report

        write_inspect_report(res, report)
    return EXIT_FINDINGS if any(f.severity in ("error", "warning") for f in res.findings) else EXIT_OK


@app.command("compare-hidden")
@guarded
def compare_hidden_cmd(
    target: Target,
    draft: Draft = None,
    draft_format: DraftFormat = None,
    engine: Engine = "sglang",
    engine_version: EngineVersion = None,
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
) -> int:
    """Training features vs what the serving engine captures: slot by slot, with the exact fix."""
    from .doctor import compare_hidden
    from .report import render_compare

    setup = _setup(target, draft, draft_format, engine, engine_version, layer_ids, train_recipe, dtype, device,
                   trust_remote_code, device_map, max_memory)
    bs = _batch_size(batch_size, setup, max_tokens)
    with _progress(quiet) as cb:
        res = compare_hidden(setup, prompts_path=prompts, train_dump=train_dump, max_tokens=max_tokens, batch_size=bs,
                             matrix=matrix or plot is not None or report is not None, limit=limit, progress=cb)
    render_compare(_console(), res)
    _write_json(json_out, res.to_dict(), trust_remote_code)
    if plot or report:
        from .plots import write_compare_report

        write_compare_report(res, report, plot)
    return EXIT_OK if res.consistent else EXIT_FINDINGS


@app.command("acceptance")
@guarded
def acceptance_cmd(
    target: Target,
    draft: Annotated[str, typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint directory.")],
    draft_format: DraftFormat = None,
    engine: Engine = "sglang",
    engine_version: EngineVersion = None,
    layer_ids: LayerIds = None,
    train_recipe: TrainRecipe = None,
    train_dump: TrainDump = None,
    prompts: Prompts = None,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="Chain length K (draft tokens per verify pass).")] = 7,
    continuation: Annotated[str, typer.Option("--continuation", help="greedy: the target's own greedy continuation (KV cache); text: the text as given.")] = "greedy",
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Tokens the target generates per prompt (greedy continuation).")] = 128,
    max_tokens: MaxTokens = 512,
    batch_size: BatchSize = "8",
    limit: Limit = None,
    temperature: Annotated[float, typer.Option("--temperature", help="> 0: expected acceptance from the distributions (no sampling noise).")] = 0.0,
    temperature_mode: Annotated[str, typer.Option("--temperature-mode", help="sampled: draft samples, sum min(p,q); argmax: draft proposes argmax (vLLM V1), p(token).")] = "sampled",
    topk: Annotated[int, typer.Option("--topk", help="Tree drafting: children per node (SGLang --speculative-eagle-topk).")] = 1,
    num_draft_tokens: Annotated[Optional[int], typer.Option("--num-draft-tokens", help="Tree node budget (SGLang --speculative-num-draft-tokens).")] = None,
    reference_loop: Annotated[bool, typer.Option("--reference-loop", help="Also run a plain sequential speculative-decoding loop and check the estimator against it.")] = False,
    scan: Annotated[bool, typer.Option("--scan", help="Rank candidate capture-point triples around the configured one by step-1 accuracy.")] = False,
    min_accept_rate: Annotated[Optional[float], typer.Option("--min-accept-rate", help="Gate: exit 1 if the serving path's first-position acceptance is below this.")] = None,
    min_tau: Annotated[Optional[float], typer.Option("--min-tau", help="Gate: exit 1 if the serving path's tau is below this.")] = None,
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write per-position acceptance bars as PNG here.")] = None,
    dtype: Dtype = "auto",
    device: Device = "auto",
    device_map: DeviceMap = None,
    max_memory: MaxMemory = None,
    trust_remote_code: TrustRemote = False,
    json_out: JsonOut = None,
    report: ReportDir = None,
    quiet: Quiet = False,
    train_template: Annotated[Optional[str], typer.Option("--train-template", help="With --serve-template: replay the --prompts/--requests conversations rendered the training way and the serving way, side by side (target, a .jinja file or a tokenizer directory).")] = None,
    serve_template: Annotated[Optional[str], typer.Option("--serve-template", help="The chat template the server renders with: target, or the file passed to the server's --chat-template.")] = None,
    train_system_prompt: Annotated[Optional[str], typer.Option("--train-system-prompt", help="System prompt the training recipe inserted into conversations without one.")] = None,
    requests: Annotated[Optional[str], typer.Option("--requests", help="With the template options: serving requests (OpenAI chat-completions JSON) to replay in both formats.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap interval over prompts (prompt-format comparison).")] = 0,
) -> int:
    """Per-position acceptance and draft accuracy under the serving and the training features."""
    from .doctor import acceptance
    from .findings import Finding
    from .report import render_acceptance

    if temperature_mode not in ("sampled", "argmax"):
        from .errors import BadInput

        raise BadInput(f"unknown --temperature-mode {temperature_mode!r}", "use sampled or argmax")
    setup = _setup(target, draft, draft_format, engine, engine_version, layer_ids, train_recipe, dtype, device,
                   trust_remote_code, device_map, max_memory)
    bs = _batch_size(batch_size, setup, max_tokens + max_new_tokens)
    fmt = None
    if train_template or serve_template or train_system_prompt is not None or requests:
        fmt = _format_acceptance(setup, prompts, requests, train_template, serve_template, train_system_prompt, limit, seed,
                                 quiet, num_steps=num_steps, continuation=continuation, max_new_tokens=max_new_tokens,
                                 max_tokens=max_tokens, batch_size=bs, temperature=temperature, temp_mode=temperature_mode,
                                 topk=topk, num_draft_tokens=num_draft_tokens, reference=reference_loop, scan=scan)
        run = fmt.serve
        run.findings = fmt.findings + run.findings
    else:
        with _progress(quiet) as cb:
            run = acceptance(setup, prompts_path=prompts, train_dump=train_dump, num_steps=num_steps, continuation=continuation,
                             max_new_tokens=max_new_tokens, max_tokens=max_tokens, batch_size=bs, temperature=temperature,
                             temp_mode=temperature_mode, topk=topk, num_draft_tokens=num_draft_tokens, reference=reference_loop,
                             scan=scan, limit=limit, progress=cb)
    serving = run.paths.get("serving", {})
    rate1 = (serving.get("chain", {}).get("per_position_rate") or [float("nan")])[0]
    if min_accept_rate is not None and not rate1 >= min_accept_rate:
        run.findings.append(Finding("ACC003", f"first-position acceptance {rate1:.3f} is below --min-accept-rate {min_accept_rate}",
                                    [f"serving path per-position rates: {serving.get('chain', {}).get('per_position_rate')}"],
                                    "fix the findings above, or retrain the draft"))
    if min_tau is not None and not serving.get("tau", float("nan")) >= min_tau:
        run.findings.append(Finding("ACC003", f"tau {serving.get('tau', float('nan')):.3f} is below --min-tau {min_tau}",
                                    [f"acc_k: {serving.get('acc_k')}"], "fix the findings above, or retrain the draft"))
    render_acceptance(_console(), run)
    if fmt is not None:
        from .templates import render_format_table

        render_format_table(_console(), fmt)
    _write_json(json_out, {**run.to_dict(), "prompt_format": fmt.to_dict()} if fmt is not None else run.to_dict(), trust_remote_code)
    if plot or report:
        from .plots import write_acceptance_report

        write_acceptance_report(run, report, plot)
    bad = [f for f in run.findings if f.severity == "error" or f.code == "ACC003"]
    if run.reference is not None and not run.reference["agrees_with_estimator"]:
        _console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)
    return EXIT_FINDINGS if bad else EXIT_OK


@app.command("gate")
@guarded
def gate_cmd(
    target: Target,
    draft: Annotated[str, typer.Option("--draft", "-d", help="EAGLE-3 draft checkpoint directory to gate.")],
    policy: Annotated[Optional[str], typer.Option("--policy", help="TOML policy file ([gate] table); flags override it.")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="gate JSON of an earlier checkpoint: fail on regression beyond max_regression.")] = None,
    engine: Annotated[Optional[str], typer.Option("--engine", "-e", help="Serving engine (policy default: sglang).")] = None,
    engine_version: EngineVersion = None,
    draft_format: DraftFormat = None,
    prompts: Prompts = None,
    min_cosine: Annotated[Optional[float], typer.Option("--min-cosine", help="Minimum mean cosine of every serving slot vs its training slot.")] = None,
    min_step1_accuracy: Annotated[Optional[float], typer.Option("--min-step1-accuracy", help="Minimum step-1 draft accuracy on the serving features.")] = None,
    min_tau: Annotated[Optional[float], typer.Option("--min-tau", help="Minimum tau on the serving features.")] = None,
    max_regression: Annotated[Optional[float], typer.Option("--max-regression", help="Allowed absolute drop vs --baseline.")] = None,
    fail_on: Annotated[Optional[str], typer.Option("--fail-on", help="Findings at or above this severity fail: error, warning or info.")] = None,
    limit: Limit = None,
    dtype: Dtype = "auto",
    device: Device = "auto",
    trust_remote_code: TrustRemote = False,
    json_out: JsonOut = None,
    summary: Annotated[Optional[str], typer.Option("--summary", help="Write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set).")] = None,
) -> int:
    """CI gate: inspect + compare-hidden + acceptance under one policy. Exit 0 pass, 1 fail, 2 bad input."""
    from .gate import Policy, markdown, run_gate, write_summary
    from .report import render_findings

    pol = Policy.load(policy, {"engine": engine, "engine_version": engine_version, "min_cosine": min_cosine,
                               "min_step1_accuracy": min_step1_accuracy, "min_tau": min_tau,
                               "max_regression": max_regression, "fail_on": fail_on, "limit": limit})
    res = run_gate(target=target, draft=draft, policy=pol, prompts=prompts, baseline=baseline, dtype=dtype,
                   device=device, draft_format=draft_format, trust_remote_code=trust_remote_code)
    text = markdown(res, draft)
    con = _console()
    from rich.table import Table

    t = Table(title=f"gate: {'PASS' if res.passed else 'FAIL'}")
    for col in ("check", "value", "threshold", "result"):
        t.add_column(col)
    for c in res.checks:
        t.add_row(c.name, "-" if c.value is None else f"{c.value:.4f}", "-" if c.threshold is None else f"{c.threshold:.4f}",
                  ("pass " if c.passed else "FAIL ") + c.detail, style=None if c.passed else "red")
    con.print(t)
    render_findings(con, res.findings, "no findings")
    write_summary(text, summary)
    _write_json(json_out, res.to_dict(), trust_remote_code)
    return EXIT_OK if res.passed else EXIT_FINDINGS


# ----------------------------------------------------------------------------- prompt format (issue 15)
TrainTemplate = Annotated[Optional[str], typer.Option("--train-template", help="Chat template the draft's training data was rendered with: target (the target tokenizer's own), a .jinja file, a tokenizer_config.json or a tokenizer directory. Default: target.")]
ServeTemplate = Annotated[Optional[str], typer.Option("--serve-template", help="Chat template the server renders with: target, or the file passed to the server's --chat-template. Default: target.")]
TrainSystemPrompt = Annotated[Optional[str], typer.Option("--train-system-prompt", help="System prompt the training recipe inserted into conversations without one (SpecForge's --chat-template NAME does).")]
TrainAddSpecial = Annotated[bool, typer.Option("--train-add-special-tokens", help="Training tokenized the rendered text with add_special_tokens=True (a BOS on top of the template's).")]
TrainKwargs = Annotated[Optional[str], typer.Option("--train-template-kwargs", help="JSON template variables training rendered with, e.g. '{\"enable_thinking\": false}'.")]
ServeKwargs = Annotated[Optional[str], typer.Option("--serve-template-kwargs", help="JSON template variables the server renders with (chat_template_kwargs).")]


def _format_acceptance(setup: Any, prompts: Optional[str], requests: Optional[str], train_template: Optional[str],
                       serve_template: Optional[str], train_system_prompt: Optional[str], limit: Optional[int], seed: int,
                       quiet: bool, **kwargs: Any):
    from .errors import BadInput
    from .templates import acceptance_by_format, load_dataset, load_requests, load_template

    if not (prompts or requests):
        raise BadInput("the prompt-format comparison needs conversations", "pass --prompts FILE or --requests FILE (chat messages)")
    convs = load_requests(requests) if requests else load_dataset(prompts, "prompts file").conversations
    if not convs:
        raise BadInput("no chat conversations to render in two formats", "pass --prompts or --requests with messages")
    convs = convs[:limit] if limit else convs
    tok, tdir = setup.target.tokenizer, setup.target.name
    train = load_template(train_template, tdir, tok, side="train", system_prompt=train_system_prompt)
    serve = load_template(serve_template, tdir, tok, side="serve")
    with _progress(quiet) as cb:
        return acceptance_by_format(setup, convs, train, serve, seed=seed, progress=cb, **kwargs)


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
) -> int:
    """Render the same conversations the training way and the serving way; report the first differing tokens."""
    from .templates import parse_kwargs, render_template_diff, template_diff

    res = template_diff(target, train_template=train_template, serve_template=serve_template,
                        train_system_prompt=train_system_prompt, train_add_special_tokens=train_add_special_tokens,
                        train_kwargs=parse_kwargs(train_template_kwargs, "--train-template-kwargs"),
                        serve_kwargs=parse_kwargs(serve_template_kwargs, "--serve-template-kwargs"),
                        train_data=train_data, requests=requests, prompts=prompts, limit=limit, train_tokenizer=train_tokenizer)
    if write_template:
        from pathlib import Path

        Path(write_template).write_text(res.train.text, encoding="utf-8")
        for f in res.findings:
            if f.fix and "write the training template to a file" in f.fix:
                f.fix = f"launch the server with --chat-template {write_template} (SGLang and vLLM), the training template written there"
    render_template_diff(_console(), res)
    _write_json(json_out, res.to_dict(), False)
    return EXIT_FINDINGS if any(f.severity in ("error", "warning") for f in res.findings) else EXIT_OK


def run() -> None:
    """Console-script entry point."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    run()
