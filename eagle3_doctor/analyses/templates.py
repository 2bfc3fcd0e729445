"""Prompt format on both sides: what the draft was trained on vs what the server renders.

Inputs
- training data as the recipes store it: OpenAI ``messages`` JSONL, ShareGPT ``conversations``
  with ``from``/``value`` (speculators' and most public sets), SpecForge's ``conversations`` with
  ``role``/``content``, and already-tokenized rows with ``input_ids`` / ``loss_mask``;
- serving requests as OpenAI chat-completions JSON (one object, an array, or JSONL), with the
  ``tools``, ``chat_template_kwargs`` and ``add_generation_prompt`` fields vLLM and SGLang read;
- a chat template on each side: the target's own (``target``), a Jinja file (what SGLang's and
  vLLM's ``--chat-template`` take), a tokenizer_config.json, or a tokenizer directory.

Rendering always goes through transformers' ``apply_chat_template`` (Jinja): the tool never
re-implements a template. Both sides are tokenized with ``add_special_tokens=False`` unless told
otherwise, as vLLM's chat endpoint (``ChatCompletionRequest.add_special_tokens`` defaults to False)
and SpecForge's ``GeneralParser.parse`` (specforge/data/parse.py) both do.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput
from ..core.findings import REQUEST, SERVER_COMMAND, Finding, Fix

if TYPE_CHECKING:
    from .results import AcceptanceRun, PathResult

# ShareGPT speaker names -> chat roles (the mapping SpecForge and speculators apply on load)
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}
CONV_FIX = 'write one conversation per line: {"messages": [{"role": "user", "content": "..."}, ...]}'

SCHEMA = "eagle3-doctor/template-diff/1"  # schemas/template-diff.v1.schema.json


# --------------------------------------------------------------------------- data model


@dataclass
class Conversation:
    messages: list[dict[str, Any]]  # role, content (+ tool_calls etc. passed through to the template)
    where: str  # "file line N": every message names its source
    tools: list[Any] | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool | None = None  # None: add one when the last message is not the assistant's


@dataclass
class TokenizedSample:
    input_ids: list[int]
    loss_mask: list[int] | None
    where: str


@dataclass
class Dataset:
    path: str
    layouts: list[str]  # openai, sharegpt, specforge, tokenized, request
    conversations: list[Conversation]
    tokenized: list[TokenizedSample]


@dataclass
class Template:
    text: str
    source: str  # human-readable origin
    path: str | None  # a file a server's --chat-template can take, when one exists
    system_prompt: str | None = None  # recipe-injected system prompt when a conversation has none
    add_special_tokens: bool = False  # tokenizer(text, add_special_tokens=...) after rendering
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra template variables (enable_thinking, ...)


# --------------------------------------------------------------------------- reading files


MAX_TEXT_FILE = 4 << 30  # training data JSONL can be large; it is still read into memory whole


def _read_text(path: Path, what: str, fix: str) -> str:
    from ..io.safeio import read_regular_bytes

    if not path.exists() and not path.is_symlink():
        raise BadInput(f"{what} {path} not found", fix)
    raw = read_regular_bytes(path, what, fix, MAX_TEXT_FILE)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from None


def _records(path: Path, what: str, fix: str) -> list[tuple[str, Any]]:
    """(where, JSON value) pairs: a whole-file JSON array or object, else JSONL."""
    text = _read_text(path, what, fix)
    if not text.strip():
        raise BadInput(f"{what} {path} is empty", fix)
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        from ..io.safeio import loads_json

        try:
            whole = loads_json(text, f"{what} {path}", fix)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, list):
            return [(f"{path} item {i}", v) for i, v in enumerate(whole)]
        if isinstance(whole, dict):
            return [(f"{path}", whole)]
    out = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            out.append((f"{path} line {i + 1}", _loads_line(line, f"{path} line {i + 1}", fix)))
        except json.JSONDecodeError as e:
            raise BadInput(f"{path} line {i + 1} is not valid JSON ({e.msg} at column {e.colno})", fix) from None
    return out


def _loads_line(line: str, where: str, fix: str) -> Any:
    from ..io.safeio import loads_json

    return loads_json(line, where, fix)


def _content(value: Any, where: str, k: int, role: str, has_calls: bool) -> Any:
    if isinstance(value, str):
        return value
    if value is None and has_calls:
        return None
    if isinstance(value, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in value
    ):
        return "".join(p["text"] for p in value)  # OpenAI content parts, text only
    raise BadInput(
        f"{where}: message {k} ({role}) content is {type(value).__name__}, not a string or text parts",
        'write "content": "..." (images and audio are not rendered)',
    )


def _messages(raw: Any, where: str, layout: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise BadInput(
            f"{where}: '{'messages' if layout in ('openai', 'request') else 'conversations'}' must be a non-empty list", CONV_FIX
        )
    out = []
    for k, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadInput(f"{where}: message {k} is a {type(m).__name__}, not an object", CONV_FIX)
        if layout == "sharegpt":
            who = m.get("from")
            if not isinstance(who, str):
                raise BadInput(f"{where}: message {k} has no 'from' speaker", 'write {"from": "human", "value": "..."}')
            role = SHAREGPT_ROLES.get(who.lower())
            if role is None:
                raise BadInput(
                    f"{where}: message {k} has unknown speaker {who!r}", f"use one of {', '.join(sorted(SHAREGPT_ROLES))}"
                )
            out.append({"role": role, "content": _content(m.get("value"), where, k, role, False)})
            continue
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise BadInput(f"{where}: message {k} has no 'role'", CONV_FIX)
        msg = {kk: v for kk, v in m.items() if kk not in ("role", "content")}
        msg = {"role": role, "content": _content(m.get("content"), where, k, role, bool(m.get("tool_calls"))), **msg}
        out.append(msg)
    return out


def _int_list(v: Any, where: str, name: str) -> list[int]:
    if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise BadInput(f"{where}: '{name}' must be a non-empty list of integers", f'write "{name}": [1, 2, ...]')
    return v


def parse_record(obj: Any, where: str) -> tuple[str, Conversation | TokenizedSample]:
    """One JSON record -> (layout, conversation or tokenized sample)."""
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}", CONV_FIX)
    if "input_ids" in obj:
        ids = _int_list(obj["input_ids"], where, "input_ids")
        mask = obj.get("loss_mask")
        if mask is not None:
            mask = _int_list(mask, where, "loss_mask")
            if len(mask) != len(ids) or any(x not in (0, 1) for x in mask):
                raise BadInput(
                    f"{where}: loss_mask must be 0/1 and as long as input_ids ({len(ids)})", "re-export the tokenized data"
                )
        return "tokenized", TokenizedSample(ids, mask, where)
    if "messages" in obj:
        layout = (
            "request" if any(k in obj for k in ("model", "tools", "chat_template_kwargs", "add_generation_prompt")) else "openai"
        )
        msgs = _messages(obj["messages"], where, layout)
    elif "conversations" in obj:
        raw = obj["conversations"]
        layout = "sharegpt" if isinstance(raw, list) and raw and isinstance(raw[0], dict) and "from" in raw[0] else "specforge"
        msgs = _messages(raw, where, layout)
    else:
        raise BadInput(f"{where}: no 'messages', 'conversations' or 'input_ids'", CONV_FIX)
    kwargs = obj.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadInput(
            f"{where}: chat_template_kwargs must be an object", 'write "chat_template_kwargs": {"enable_thinking": false}'
        )
    tools = obj.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadInput(f"{where}: tools must be a list", "write the OpenAI tools array")
    agp = obj.get("add_generation_prompt")
    if agp is not None and not isinstance(agp, bool):
        raise BadInput(f"{where}: add_generation_prompt must be true or false", "write true or false")
    return layout, Conversation(msgs, where, tools, dict(kwargs), agp)


def load_dataset(path: str | Path, what: str = "training data") -> Dataset:
    """Conversations or tokenized rows from JSON/JSONL, any of the layouts above (mixed is fine)."""
    p = Path(path)
    fix = "pass a JSONL file of OpenAI messages, ShareGPT/SpecForge conversations or input_ids/loss_mask rows"
    layouts: list[str] = []
    convs: list[Conversation] = []
    toks: list[TokenizedSample] = []
    for where, obj in _records(p, what, fix):
        layout, item = parse_record(obj, where)
        if layout not in layouts:
            layouts.append(layout)
        (toks if isinstance(item, TokenizedSample) else convs).append(item)  # type: ignore[arg-type]
    return Dataset(str(p), layouts, convs, toks)


def load_requests(path: str | Path) -> list[Conversation]:
    """Serving requests: OpenAI chat-completions bodies (one object, an array, or JSONL)."""
    ds = load_dataset(path, "requests file")
    if ds.tokenized:
        raise BadInput(
            f"{ds.tokenized[0].where}: a chat-completions request has 'messages', not input_ids",
            'write {"model": "...", "messages": [...]} per request',
        )
    return ds.conversations


# --------------------------------------------------------------------------- templates


def _template_from_json(path: Path, data: Any) -> str:
    ct = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(ct, list):  # [{"name": "default", "template": "..."}, ...]
        named = {d.get("name"): d.get("template") for d in ct if isinstance(d, dict)}
        ct = named.get("default")
    if not isinstance(ct, str) or not ct:
        raise BadInput(f"{path} has no chat_template string", "pass the .jinja file or a tokenizer directory that has one")
    return ct


def load_template(
    spec: str | None,
    target_dir: str | None,
    target_tokenizer: Any,
    *,
    side: str,
    system_prompt: str | None = None,
    add_special_tokens: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> Template:
    """Resolve a template: 'target' (the target tokenizer's own), a Jinja file, a tokenizer_config.json
    or a tokenizer directory. side names the option in error messages (train or serve)."""
    opt = f"--{side}-template"
    kw = dict(kwargs or {})
    if spec is None or spec == "target":
        text = getattr(target_tokenizer, "chat_template", None)
        if not isinstance(text, str) or not text:
            raise BadInput("the target tokenizer has no chat_template", f"pass {opt} FILE.jinja")
        tpath = None
        if target_dir and (Path(target_dir) / "chat_template.jinja").is_file():
            tpath = str(Path(target_dir) / "chat_template.jinja")
        return Template(text, "the target tokenizer's chat_template", tpath, system_prompt, add_special_tokens, kw)
    p = Path(spec)
    if p.is_dir():
        if (p / "chat_template.jinja").is_file():
            f = p / "chat_template.jinja"
            return Template(_read_text(f, "template", f"fix {opt}"), f"{f}", str(f), system_prompt, add_special_tokens, kw)
        cfg = p / "tokenizer_config.json"
        if not cfg.is_file():
            raise BadInput(f"{opt} {p} has neither chat_template.jinja nor tokenizer_config.json", f"pass {opt} FILE.jinja")
        return load_template(
            str(cfg),
            target_dir,
            target_tokenizer,
            side=side,
            system_prompt=system_prompt,
            add_special_tokens=add_special_tokens,
            kwargs=kw,
        )
    if not p.is_file():
        raise BadInput(f"{opt} {spec!r} is not a file or directory", f"pass {opt} target, a .jinja file or a tokenizer directory")
    text = _read_text(p, "template", f"fix {opt}")
    if p.suffix == ".json":
        try:
            data = _loads_line(text, f"{opt} {p}", "pass the .jinja file instead")
        except json.JSONDecodeError as e:
            raise BadInput(f"{opt} {p} is not valid JSON ({e.msg})", "pass the .jinja file instead") from None
        return Template(_template_from_json(p, data), f"{p} (chat_template)", None, system_prompt, add_special_tokens, kw)
    if not text.strip():
        raise BadInput(f"{opt} {p} is empty", "pass the Jinja chat template the server uses")
    return Template(text, str(p), str(p), system_prompt, add_special_tokens, kw)


# --------------------------------------------------------------------------- rendering


@dataclass
class Rendered:
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]
    messages: list[dict[str, Any]]  # what was passed to the template (system prompt injected, if any)
    content_spans: list[tuple[int, int] | None]  # char span of each message's content in text


def prompt_view(conv: Conversation) -> Conversation:
    """What a server is asked to render for this conversation: everything before the last assistant
    turn (history included), with a generation prompt."""
    msgs = conv.messages
    if conv.add_generation_prompt is None and msgs[-1]["role"] == "assistant":
        last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        if last == 0:
            raise BadInput(f"{conv.where}: the conversation starts with the assistant", "add the user turn it answers")
        msgs = msgs[:last]
    return Conversation(msgs, conv.where, conv.tools, conv.template_kwargs, conv.add_generation_prompt)


def render(tokenizer: Any, tpl: Template, conv: Conversation) -> Rendered:
    from jinja2 import TemplateError

    msgs = [dict(m) for m in conv.messages]
    if tpl.system_prompt is not None and msgs[0]["role"] != "system":
        msgs.insert(0, {"role": "system", "content": tpl.system_prompt})
    agp = conv.add_generation_prompt if conv.add_generation_prompt is not None else msgs[-1]["role"] != "assistant"
    kwargs = {**tpl.kwargs, **conv.template_kwargs}
    try:
        text = tokenizer.apply_chat_template(
            msgs, chat_template=tpl.text, tools=conv.tools, tokenize=False, add_generation_prompt=agp, **kwargs
        )
    except TemplateError as e:
        raise BadInput(
            f"{tpl.source} fails on {conv.where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            "fix the template or that conversation",
        ) from None
    if not isinstance(text, str):
        raise BadInput(f"{tpl.source} did not render a string", "pass a chat template, not a processor template")
    enc = tokenizer(text, add_special_tokens=tpl.add_special_tokens, return_offsets_mapping=True)
    spans: list[tuple[int, int] | None] = []
    cur = 0
    for m in msgs:
        c = m.get("content")
        pos = text.find(c, cur) if isinstance(c, str) and c else -1
        if pos < 0:
            spans.append(None)
            continue
        spans.append((pos, pos + len(c)))
        cur = pos + len(c)
    return Rendered(text, list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]], msgs, spans)


def region_of(r: Rendered, tok_index: int) -> str:
    """Where token tok_index sits: '<role> header' (what precedes message k's content, i.e. the end
    of the previous turn and the role tag), '<role> content', or 'generation prompt'."""
    if tok_index >= len(r.ids):
        return "end of prompt"
    c = r.offsets[tok_index][0] if tok_index < len(r.offsets) else len(r.text)
    if r.offsets[tok_index] == (0, 0) and tok_index == 0 and r.ids:
        return "start (special token)"
    for k, span in enumerate(r.content_spans):
        if span is None:
            continue
        role = r.messages[k]["role"]
        if c < span[0]:
            return f"{role} header (message {k})"
        if c < span[1]:
            return f"{role} content (message {k})"
    return "generation prompt"


# --------------------------------------------------------------------------- diff


@dataclass
class DiffSpan:
    kind: str  # bos, system, generation_prompt, whitespace, thinking, tools, layout
    region: str
    train_at: int
    serve_at: int
    train_tokens: list[str]
    serve_tokens: list[str]
    train_text: str = ""  # the whole differing stretch, decoded (empty: nothing on that side)
    serve_text: str = ""


@dataclass
class ConvDiff:
    where: str
    identical: bool
    train_len: int
    serve_len: int
    spans: list[DiffSpan]


def _tok_strs(tokenizer: Any, ids: Sequence[int], limit: int = 6) -> list[str]:
    out = [tokenizer.decode([i]) for i in ids[:limit]]
    if len(ids) > limit:
        out.append(f"... +{len(ids) - limit}")
    return out


def _snippet(tokenizer: Any, ids: Sequence[int], limit: int = 60) -> str:
    text = tokenizer.decode(list(ids))
    return text if len(text) <= limit else text[:limit] + "..."


def _classify(tokenizer: Any, tr: Rendered, sv: Rendered, a: tuple[int, int], b: tuple[int, int]) -> str:
    ta, sa = tr.ids[a[0] : a[1]], sv.ids[b[0] : b[1]]
    bos = tokenizer.bos_token_id
    if bos is not None and (bos in ta or bos in sa) and min(a[0], b[0]) <= 1:
        return "bos"
    t_text, s_text = tokenizer.decode(ta), tokenizer.decode(sa)
    if t_text.strip() == s_text.strip():
        return "whitespace"
    low = (t_text + " " + s_text).lower()
    if "think" in low:
        return "thinking"
    if "tool" in low:
        return "tools"
    reg = region_of(tr, a[0]) if a[0] < len(tr.ids) else region_of(sv, b[0])
    sreg = region_of(sv, b[0]) if b[0] < len(sv.ids) else reg
    if reg.startswith("system") or sreg.startswith("system") or ("system" in t_text.lower()) != ("system" in s_text.lower()):
        return "system"
    if reg in ("generation prompt", "end of prompt"):
        return "generation_prompt"
    return "layout"


def diff_conversation(tokenizer: Any, train: Template, serve: Template, conv: Conversation) -> ConvDiff:
    view = prompt_view(conv)
    tr, sv = render(tokenizer, train, view), render(tokenizer, serve, view)
    if tr.ids == sv.ids:
        return ConvDiff(conv.where, True, len(tr.ids), len(sv.ids), [])
    sm = difflib.SequenceMatcher(None, tr.ids, sv.ids, autojunk=False)
    spans = []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal":
            continue
        kind = _classify(tokenizer, tr, sv, (a0, a1), (b0, b1))
        region = region_of(tr, a0) if a0 < len(tr.ids) else region_of(sv, b0)
        # show a little of both sides even for pure insertions: the neighbour locates the gap
        spans.append(
            DiffSpan(
                kind,
                region,
                a0,
                b0,
                _tok_strs(tokenizer, tr.ids[a0 : max(a1, a0 + 1)]),
                _tok_strs(tokenizer, sv.ids[b0 : max(b1, b0 + 1)]),
                _snippet(tokenizer, tr.ids[a0:a1]),
                _snippet(tokenizer, sv.ids[b0:b1]),
            )
        )
    return ConvDiff(conv.where, False, len(tr.ids), len(sv.ids), spans)


KIND_CODE = {
    "layout": "TPL001",
    "bos": "TPL002",
    "system": "TPL003",
    "generation_prompt": "TPL004",
    "whitespace": "TPL005",
    "thinking": "TPL006",
    "tools": "TPL007",
}
KIND_TITLE = {
    "layout": "the serving template renders role tags / turn layout differently from training",
    "bos": "BOS handling differs: one side starts with a BOS the other lacks (or has it twice)",
    "system": "a system prompt is present on one side only",
    "generation_prompt": "the generation prompt (the assistant header the draft continues from) differs",
    "whitespace": "the renderings differ only in whitespace",
    "thinking": "the thinking section is rendered on one side only",
    "tools": "the tool section differs",
}


def server_template_fix(train: Template, write_hint: str) -> Fix:
    if train.path:
        return Fix(
            f"launch the server with --chat-template {train.path} (SGLang and vLLM both take the flag), "
            "the template the draft was trained on",
            file=SERVER_COMMAND,
            key="--chat-template",
            value=str(train.path),
            snippet=f"--chat-template {train.path}",
        )
    return Fix(
        f"write the training template to a file ({write_hint}) and launch the server with --chat-template FILE (SGLang and vLLM)",
        file=SERVER_COMMAND,
        key="--chat-template",
        snippet="--chat-template FILE",
    )


def written_template_fix(path: str) -> Fix:
    """The fix once `template-diff --write-template PATH` has written the training template there."""
    return Fix(
        f"launch the server with --chat-template {path} (SGLang and vLLM), the training template written there",
        file=SERVER_COMMAND,
        key="--chat-template",
        value=path,
        snippet=f"--chat-template {path}",
    )


def _fix_for(kind: str, train: Template, serve: Template, example: ConvDiff, write_hint: str) -> str | Fix:
    if kind == "system" and train.system_prompt is not None and serve.system_prompt is None:
        msg = {"role": "system", "content": train.system_prompt}
        return Fix(
            f"the training recipe inserted the system prompt {train.system_prompt!r} into every conversation "
            f"without one: send it as the first message of every request "
            f'({{"role": "system", "content": {json.dumps(train.system_prompt)}}}), or retrain without it',
            file=REQUEST,
            key="messages[0]",
            value=msg,
            snippet=json.dumps(msg),
        )
    if kind == "bos" and train.add_special_tokens != serve.add_special_tokens:
        return (
            "the training side tokenized the rendered text with add_special_tokens="
            f"{train.add_special_tokens}: retrain tokenizing with add_special_tokens=False (the template already "
            "places BOS), as SpecForge's parser does"
        )
    if kind == "thinking":
        kw = {k: v for k, v in train.kwargs.items()}
        if kw:
            return Fix(
                f'send "chat_template_kwargs": {json.dumps(kw)} in every request (the values training rendered with), '
                "or " + server_template_fix(train, write_hint),
                file=REQUEST,
                key="chat_template_kwargs",
                value=kw,
                snippet=f'"chat_template_kwargs": {json.dumps(kw)}',
            )
    return server_template_fix(train, write_hint)


def diff_findings(
    tokenizer: Any,
    train: Template,
    serve: Template,
    diffs: list[ConvDiff],
    write_hint: str = "eagle3-doctor template-diff ... --write-template train.jinja",
) -> list[Finding]:
    """One finding per kind of difference, naming the first differing tokens of the first conversation
    that shows it, and how many conversations show it."""
    out: list[Finding] = []
    total = len(diffs)
    by_kind: dict[str, list[tuple[ConvDiff, DiffSpan]]] = {}
    for d in diffs:
        seen: set[str] = set()
        for s in d.spans:
            if s.kind not in seen:
                by_kind.setdefault(s.kind, []).append((d, s))
                seen.add(s.kind)
    for kind in KIND_CODE:
        hits = by_kind.get(kind)
        if not hits:
            continue
        d, s = hits[0]
        regions = sorted({sp.region.split(" (")[0] for dd, _ in hits for sp in dd.spans if sp.kind == kind})
        ev = [
            f"{len(hits)} of {total} conversation(s); first at {d.where}",
            f"first difference in the {s.region}: training token {s.train_at} {s.train_tokens} "
            f"vs serving token {s.serve_at} {s.serve_tokens}",
            f"differing text: training {s.train_text!r} vs serving {s.serve_text!r}",
            f"regions affected: {', '.join(regions)}",
            f"prompt length: training {d.train_len} tokens, serving {d.serve_len}",
        ]
        out.append(
            Finding(
                KIND_CODE[kind],
                f"{KIND_TITLE[kind]} ({len(hits)} of {total} prompts)",
                ev,
                _fix_for(kind, train, serve, d, write_hint),
                data={"count": len(hits), "total": total, "first": s.__dict__, "where": d.where},
            )
        )
    return out


# --------------------------------------------------------------------------- the command


@dataclass
class TemplateDiffResult:
    target: str
    train: Template
    serve: Template
    conversations: int
    identical: int
    diffs: list[ConvDiff]
    findings: list[Finding]
    data_report: dict[str, Any] | None = None
    tokenizer_report: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def tpl(t: Template) -> dict[str, Any]:
            return {
                "source": t.source,
                "path": t.path,
                "system_prompt": t.system_prompt,
                "add_special_tokens": t.add_special_tokens,
                "kwargs": t.kwargs,
            }

        return {
            "schema": SCHEMA,
            "target": self.target,
            "train_template": tpl(self.train),
            "serve_template": tpl(self.serve),
            "conversations": self.conversations,
            "identical": self.identical,
            "diffs": [
                {
                    "where": d.where,
                    "identical": d.identical,
                    "train_len": d.train_len,
                    "serve_len": d.serve_len,
                    "spans": [s.__dict__ for s in d.spans],
                }
                for d in self.diffs
            ],
            "findings": [f.to_dict() for f in self.findings],
            "data_report": self.data_report,
            "tokenizer_report": self.tokenizer_report,
            "notes": self.notes,
        }


def load_tokenizer(path: str, what: str = "--target") -> Any:
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"{what} {p} is a file, not a tokenizer directory", f"point {what} at the model directory")
    try:
        # never the tokenizer's own Python (auto_map): transformers would otherwise ask on stdin, and a
        # `yes |` in a script answers for the user; this command has no option to allow it
        return AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as e:
        if "trust_remote_code" in str(e):
            raise BadInput(
                f"the tokenizer in {path} needs its own Python code (auto_map), which eagle3-doctor never runs here",
                f"template-diff has no option to run it: point {what} at a copy whose tokenizer_config.json names a "
                "built-in tokenizer_class (with tokenizer.json), or use the model's official tokenizer",
            ) from None
        raise BadInput(
            f"cannot load a tokenizer from {path} ({str(e).splitlines()[0][:160]})",
            f"point {what} at a directory with tokenizer.json / tokenizer_config.json",
        ) from None


def parse_kwargs(text: str | None, opt: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{opt} is not valid JSON ({e.msg})", f"write e.g. {opt} '{{\"enable_thinking\": false}}'") from None
    if not isinstance(v, dict):
        raise BadInput(f"{opt} must be a JSON object", f"write e.g. {opt} '{{\"enable_thinking\": false}}'")
    return v


def _conversations(
    requests: str | None, prompts: str | None, ds: Any, train_data: str | None, limit: int | None
) -> tuple[list[Conversation], list[str]]:
    """The conversations to render both ways: the server's requests, else the prompts, else the training data's."""
    convs: list[Conversation] = []
    notes: list[str] = []
    if requests:
        convs = load_requests(requests)
        notes.append(f"conversations: {len(convs)} serving request(s) from {requests}")
    elif prompts:
        convs = load_dataset(prompts, "prompts file").conversations
        notes.append(f"conversations: {len(convs)} from {prompts}")
    elif ds is not None and ds.conversations:
        convs = ds.conversations
        notes.append(f"conversations: {len(convs)} from the training data {train_data}, each cut before its last assistant turn")
    return (convs[:limit] if limit else convs), notes


def template_diff(
    target: str,
    *,
    train_template: str | None = None,
    serve_template: str | None = None,
    train_system_prompt: str | None = None,
    train_add_special_tokens: bool = False,
    train_kwargs: dict[str, Any] | None = None,
    serve_kwargs: dict[str, Any] | None = None,
    train_data: str | None = None,
    requests: str | None = None,
    prompts: str | None = None,
    limit: int | None = None,
    train_tokenizer: str | None = None,
) -> TemplateDiffResult:
    """Render the same conversations the training way and the serving way; diff token by token.
    train_tokenizer: the tokenizer the draft's data was made with (compared with the target's)."""
    tok = load_tokenizer(target)
    train = load_template(
        train_template,
        target,
        tok,
        side="train",
        system_prompt=train_system_prompt,
        add_special_tokens=train_add_special_tokens,
        kwargs=train_kwargs,
    )
    serve = load_template(serve_template, target, tok, side="serve", kwargs=serve_kwargs)
    ds = load_dataset(train_data) if train_data else None
    convs, notes = _conversations(requests, prompts, ds, train_data, limit)
    tok_rep, drep = None, None
    pre: list[Finding] = []
    if (
        train_tokenizer is None
        and train_template
        and Path(train_template).is_dir()
        and (Path(train_template) / "tokenizer_config.json").is_file()
    ):
        train_tokenizer = train_template  # the template came with a tokenizer: compare that one too
    if train_tokenizer:
        tok_rep, tf = tokenizer_findings(tok, load_tokenizer(train_tokenizer, "--train-tokenizer"), train_tokenizer)
        pre += tf
    if ds is not None:
        drep = data_report(ds)
        if ds.tokenized:
            lm = loss_mask_report(tok, train, ds.tokenized)
            drep["loss_mask"] = lm
            pre += loss_mask_findings(lm, str(ds.path))
    if not convs and (tok_rep is not None or (ds is not None and ds.tokenized)):
        notes.append("no conversations with messages: tokenizer and data checks only")
        return TemplateDiffResult(target, train, serve, 0, 0, [], pre, drep, tok_rep, notes)
    if not convs:
        raise BadInput("no conversations to render", "pass --requests FILE, --prompts FILE or --train-data FILE with messages")
    diffs = [diff_conversation(tok, train, serve, c) for c in convs]
    findings = pre + diff_findings(tok, train, serve, diffs)
    return TemplateDiffResult(
        target, train, serve, len(diffs), sum(d.identical for d in diffs), diffs, findings, drep, tok_rep, notes
    )


def iter_roles(convs: Iterable[Conversation]) -> Iterable[str]:
    for c in convs:
        for m in c.messages:
            yield m["role"]


# --------------------------------------------------------------------------- acceptance under both formats


def paired_bootstrap(
    num_a: Sequence[float],
    den_a: Sequence[float],
    num_b: Sequence[float],
    den_b: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float]:
    """Interval on ratio_b - ratio_a (ratio = sum(num) / sum(den)), resampling prompts with the same
    indices for both sides (the prompts are paired: one conversation, two renderings). Seeded, so a
    report is reproducible."""
    import numpy as np

    na, da, nb, db = (np.asarray(x, dtype=np.float64) for x in (num_a, den_a, num_b, den_b))
    n = na.size
    point = float(nb.sum() / db.sum() - na.sum() / da.sum())
    if n < 2:
        return {"diff": point, "lo": float("nan"), "hi": float("nan"), "n_prompts": int(n), "n_boot": 0, "level": level}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = nb[idx].sum(1) / db[idx].sum(1) - na[idx].sum(1) / da[idx].sum(1)
    diffs = diffs[np.isfinite(diffs)]
    lo, hi = np.quantile(diffs, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {
        "diff": point,
        "lo": float(lo),
        "hi": float(hi),
        "n_prompts": int(n),
        "n_boot": int(n_boot),
        "level": level,
        "seed": seed,
    }


def render_prompt_ids(tokenizer: Any, tpl: Template, convs: Sequence[Conversation], max_tokens: int | None) -> list[list[int]]:
    out = []
    for c in convs:
        ids = render(tokenizer, tpl, prompt_view(c)).ids
        out.append(ids[:max_tokens] if max_tokens else ids)
    return out


@dataclass
class FormatComparison:
    train: AcceptanceRun  # the prompts rendered the training way
    serve: AcceptanceRun  # the same prompts rendered the serving way
    table: dict[str, Any]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "findings": [f.to_dict() for f in self.findings],
            "training_format_run": self.train.to_dict(),
            "serving_format_run": self.serve.to_dict(),
        }


def _per_prompt(res: PathResult) -> tuple[list[float], list[float], list[float], list[float]]:
    acc = [float(sum(a)) for a in res.accepted_lengths]
    passes = [float(len(a)) for a in res.accepted_lengths]
    s1 = res.step1_counts
    return acc, passes, [float(h) for h, _ in s1], [float(n) for _, n in s1]


def acceptance_by_format(
    setup: Any,
    convs: Sequence[Conversation],
    train: Template,
    serve: Template,
    opts: Any,
    *,
    seed: int = 0,
    n_boot: int = 2000,
    progress: Any = None,
) -> FormatComparison:
    """Replay the same conversations rendered the training way and the serving way through
    :func:`acceptance.measure_acceptance` with ``opts`` (the serving feature path both times, so only the format
    differs) and compare per-position acceptance and step-1 accuracy, with paired bootstrap intervals over prompts."""
    from dataclasses import replace

    from .acceptance.run import measure_acceptance

    tok = setup.target.tokenizer
    diffs = [diff_conversation(tok, train, serve, c) for c in convs]
    runs = {}
    for side, tpl in (("training", train), ("serving", serve)):
        ids = render_prompt_ids(tok, tpl, convs, opts.max_tokens)
        # convs are already cut to --limit; a static --serve-cmd token tree is not applied to this comparison
        kw = {"progress": progress} if progress is not None else {}
        runs[side] = measure_acceptance(setup, replace(opts, limit=None, token_tree=None), prompt_ids=ids, **kw)
    rt, rs = runs["training"].paths.get("serving"), runs["serving"].paths.get("serving")
    if rt is None or rs is None:
        raise BadInput(
            "the serving feature path is not measurable with this draft", "fix the slot count first (see acceptance notes)"
        )
    at, pt, ht, nt = _per_prompt(rt)
    as_, ps, hs, ns = _per_prompt(rs)
    # mean acceptance length = 1 + accepted / passes: the interval of the difference is that of accepted/passes
    mal = paired_bootstrap(at, pt, as_, ps, n_boot=n_boot, seed=seed)
    s1 = paired_bootstrap(ht, nt, hs, ns, n_boot=n_boot, seed=seed + 1) if ht and hs else None
    table = {
        "prompts": len(convs),
        "identical_prompts": sum(d.identical for d in diffs),
        "training_format": _format_figures(rt),
        "serving_format": _format_figures(rs),
        "mean_acceptance_length_diff": mal,
        "step1_accuracy_diff": s1,
        "template_train": train.source,
        "template_serve": serve.source,
    }
    findings = diff_findings(tok, train, serve, diffs)
    if mal["hi"] < 0:
        fix = next(
            (f.fix for f in findings), server_template_fix(train, "eagle3-doctor template-diff ... --write-template train.jinja")
        )
        findings.append(_format_cost_finding(table, len(convs), fix))
    return FormatComparison(runs["training"], runs["serving"], table, findings)


def _format_figures(path: PathResult) -> dict[str, Any]:
    """One format's row of the comparison: the serving path's figures with prompts in that format."""
    chain = path.chain.to_dict()  # as written: a run without a verify pass has no figures
    return {
        "mean_acceptance_length": chain.get("mean_acceptance_length"),
        "per_position_rate": chain.get("per_position_rate"),
        "acc_k": path.acc_k,
        "tau": path.tau,
    }


def _format_cost_finding(table: dict[str, Any], n_convs: int, fix: str | None) -> Finding:
    """TPL008: the serving format costs acceptance, with both paired intervals over prompts."""
    mal, s1 = table["mean_acceptance_length_diff"], table["step1_accuracy_diff"]
    serving, training = table["serving_format"], table["training_format"]
    ev = [
        f"mean acceptance length: serving format {serving['mean_acceptance_length']:.3f}, "
        f"training format {training['mean_acceptance_length']:.3f}; difference {mal['diff']:+.3f} "
        f"({int(100 * mal['level'])}% CI {mal['lo']:+.3f} .. {mal['hi']:+.3f}, paired bootstrap over {mal['n_prompts']} prompts, seed {mal['seed']})",
    ]
    if s1 is not None:
        ev.append(
            f"step-1 accuracy: serving format {serving['acc_k'][0]:.3f}, training format {training['acc_k'][0]:.3f}; "
            f"difference {s1['diff']:+.3f} (CI {s1['lo']:+.3f} .. {s1['hi']:+.3f})"
        )
    ev.append(f"{table['identical_prompts']} of {n_convs} prompts render identically both ways")
    return Finding(
        "TPL008",
        f"acceptance is significantly lower with prompts in the serving format "
        f"({serving['mean_acceptance_length']:.2f} vs {training['mean_acceptance_length']:.2f} mean acceptance length)",
        ev,
        fix,
        data={"mean_acceptance_length_diff": mal, "step1_accuracy_diff": s1},
    )


# --------------------------------------------------------------------------- tokenizer and data checks


def _vocab_hash(tok: Any) -> str:
    import hashlib

    items = sorted(tok.get_vocab().items())
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def tokenizer_facts(tok: Any) -> dict[str, Any]:
    probe = "hello"
    plain = tok(probe, add_special_tokens=False)["input_ids"]
    special = tok(probe)["input_ids"]
    return {
        "vocab_size": len(tok),
        "vocab_hash": _vocab_hash(tok),
        "bos_token": tok.bos_token,
        "eos_token": tok.eos_token,
        "pad_token": tok.pad_token,
        "unk_token": tok.unk_token,
        "added_tokens": sorted(str(t) for t in tok.get_added_vocab()),
        "adds_bos": bool(len(special) > len(plain) and tok.bos_token_id is not None and special[0] == tok.bos_token_id),
        "adds_eos": bool(len(special) > len(plain) and tok.eos_token_id is not None and special[-1] == tok.eos_token_id),
        "chat_template_hash": _text_hash(getattr(tok, "chat_template", None)),
    }


def _text_hash(text: Any) -> str | None:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16] if isinstance(text, str) else None


def tokenizer_findings(target_tok: Any, draft_tok: Any, draft_src: str) -> tuple[dict[str, Any], list[Finding]]:
    """The draft's training tokenizer vs the target's: vocabulary, special and added tokens, BOS/EOS."""
    t, d = tokenizer_facts(target_tok), tokenizer_facts(draft_tok)
    out: list[Finding] = []
    if t["vocab_hash"] != d["vocab_hash"]:
        tv, dv = target_tok.get_vocab(), draft_tok.get_vocab()
        moved = sorted(k for k in set(tv) & set(dv) if tv[k] != dv[k])
        ev = [
            f"target: {t['vocab_size']} tokens, hash {t['vocab_hash']}; draft training tokenizer ({draft_src}): "
            f"{d['vocab_size']} tokens, hash {d['vocab_hash']}",
            f"{len(set(tv) - set(dv))} token(s) only in the target, {len(set(dv) - set(tv))} only in the training "
            f"tokenizer, {len(moved)} with another id" + (f" (first: {moved[:3]})" if moved else ""),
        ]
        out.append(
            Finding(
                "TPL009",
                "the draft was trained with another tokenizer than the target's",
                ev,
                "retrain the draft on data tokenized with the target's own tokenizer (ids must mean the same tokens)",
            )
        )
    diffs = [
        f"{k}: target {t[k]!r}, training {d[k]!r}"
        for k in ("bos_token", "eos_token", "pad_token", "unk_token", "adds_bos", "adds_eos")
        if t[k] != d[k]
    ]
    only_t = sorted(set(t["added_tokens"]) - set(d["added_tokens"]))
    only_d = sorted(set(d["added_tokens"]) - set(t["added_tokens"]))
    if only_t or only_d:
        diffs.append(f"added tokens only in the target: {only_t[:8]}; only in training: {only_d[:8]}")
    if diffs:
        out.append(
            Finding(
                "TPL010",
                "special tokens or BOS/EOS handling differ between the training tokenizer and the target's",
                diffs,
                "tokenize the training data with the target's tokenizer files (tokenizer.json, tokenizer_config.json) "
                "and retrain, or serve with the training tokenizer's special tokens",
            )
        )
    return {"target": t, "training": d, "training_source": draft_src}, out


def role_headers(tokenizer: Any, tpl: Template, roles: Iterable[str]) -> dict[str, list[int]]:
    """The tokens a template puts right before a message's content, per role (rendered, never guessed):
    a sentinel content is rendered through the template and the tokens between the previous turn and
    the sentinel are that role's header."""
    sentinel = "\u2063SENTINEL\u2063"
    out: dict[str, list[int]] = {}
    for role in roles:
        alone = role in ("user", "system")
        msgs = (
            [{"role": role, "content": sentinel}]
            if alone
            else [{"role": "user", "content": "x"}, {"role": role, "content": sentinel}]
        )
        try:
            text = tokenizer.apply_chat_template(msgs, chat_template=tpl.text, tokenize=False, **tpl.kwargs)
        except Exception:  # a template that refuses the role: it has no header for it
            continue
        pos = text.find(sentinel)
        if pos <= 0:
            continue
        before = text[:pos].rstrip()  # trailing whitespace may merge with the content's first token
        if not alone:
            prev = tokenizer.apply_chat_template(msgs[:1], chat_template=tpl.text, tokenize=False, **tpl.kwargs)
            if before.startswith(prev):
                before = before[len(prev) :]
        ids = tokenizer(before, add_special_tokens=False)["input_ids"]
        if ids and tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id and len(ids) > 1:
            ids = ids[1:]  # BOS opens the conversation, not the role
        if ids:
            out[role] = ids
    return out


def _find_all(seq: list[int], sub: list[int]) -> list[int]:
    n = len(sub)
    return [i for i in range(len(seq) - n + 1) if seq[i : i + n] == sub] if n else []


def loss_mask_report(tokenizer: Any, tpl: Template, samples: Sequence[TokenizedSample]) -> dict[str, Any]:
    """Which roles the loss mask trained on: each masked token is attributed to the role whose header
    (as the training template renders it) precedes it most closely."""
    headers = role_headers(tokenizer, tpl, ("system", "user", "assistant", "tool"))
    trained: dict[str, int] = {}
    total: dict[str, int] = {}
    bos = tokenizer.bos_token_id
    dup_bos = 0
    with_mask = [s for s in samples if s.loss_mask is not None]
    for s in samples:
        if bos is not None and len(s.input_ids) > 1 and s.input_ids[0] == bos and s.input_ids[1] == bos:
            dup_bos += 1
    for s in with_mask:
        marks = sorted((i + len(h), r) for r, h in headers.items() for i in _find_all(s.input_ids, h))
        role_at = ["(before any header)"] * len(s.input_ids)
        for (start, r), nxt in zip(marks, marks[1:] + [(len(s.input_ids), "")]):
            for j in range(start, nxt[0]):
                role_at[j] = r
        for r, m in zip(role_at, s.loss_mask):  # type: ignore[arg-type]
            total[r] = total.get(r, 0) + 1
            trained[r] = trained.get(r, 0) + int(m)
    return {
        "samples": len(samples),
        "with_loss_mask": len(with_mask),
        "trained_tokens_by_role": trained,
        "tokens_by_role": total,
        "trained_share": (sum(trained.values()) / max(sum(total.values()), 1)) if with_mask else None,
        "duplicated_bos": dup_bos,
        "role_headers": {r: tokenizer.decode(h) for r, h in headers.items()},
    }


def loss_mask_findings(rep: dict[str, Any], where: str) -> list[Finding]:
    out: list[Finding] = []
    tr = rep["trained_tokens_by_role"]
    if rep["with_loss_mask"]:
        other = {r: n for r, n in tr.items() if r != "assistant" and n}
        if not tr.get("assistant"):
            out.append(
                Finding(
                    "TPL011",
                    "the training loss mask covers no assistant tokens",
                    [f"{where}: trained tokens by role {tr}"],
                    "rebuild the loss mask from the assistant turns (SpecForge: --chat-template matching the data's template)",
                )
            )
        elif other:
            out.append(
                Finding(
                    "TPL011",
                    f"the training loss mask also trains on {', '.join(sorted(other))} tokens; serving drafts only assistant replies",
                    [f"{where}: trained tokens by role {tr} (of {rep['tokens_by_role']})"],
                    "mask everything but the assistant turns (SpecForge's parser does; check the assistant header "
                    "in the recipe's template matches the data)",
                    severity="warning",
                )
            )
    if rep["duplicated_bos"]:
        out.append(
            Finding(
                "TPL002",
                f"{rep['duplicated_bos']} of {rep['samples']} tokenized training sample(s) start with two BOS tokens",
                [f"{where}: the template's BOS plus the tokenizer's own"],
                "retrain tokenizing the rendered text with add_special_tokens=False (the template already places BOS)",
            )
        )
    return out


def data_report(ds: Dataset) -> dict[str, Any]:
    """What the draft learned from, sampled: layouts, system prompts, turns, roles."""
    convs = ds.conversations
    n = len(convs)
    roles: dict[str, int] = {}
    for r in iter_roles(convs):
        roles[r] = roles.get(r, 0) + 1
    turns = [sum(m["role"] == "user" for m in c.messages) for c in convs]
    systems = [c.messages[0]["content"] for c in convs if c.messages[0]["role"] == "system"]
    common = max(set(systems), key=systems.count) if systems else None
    return {
        "path": ds.path,
        "layouts": ds.layouts,
        "conversations": n,
        "tokenized_rows": len(ds.tokenized),
        "with_system_prompt": len(systems),
        "share_with_system_prompt": (len(systems) / n) if n else None,
        "most_common_system_prompt": common,
        "average_user_turns": (sum(turns) / n) if n else None,
        "messages_by_role": roles,
        "with_tools": sum(1 for c in convs if c.tools),
    }
