"""The target's tokenizer: loaded in this process (``load_tokenizer``), or ahead of it by a helper process that
loads it and tokenizes the run's prompts while this one imports torch and reads the weights (``start``, ``taken``).

transformers' import is most of a tokenizer's load (1.6-2.6 s on an H200 host, where 5.17 parses every installed
distribution's metadata), and all of it is Python: on a thread beside the weights' threaded read it held the
interpreter the read needs between its spans (the read 0.8 s alone, 2.0 s beside it; bench/RESULTS.md, 2026-12-04).
A process of its own runs it on another core. The helper runs the functions this process would (``load_tokenizer``,
``io.prompts.tokenized``), so the ids it sends back are the ones this process would have computed; anything a run
asks of the tokenizer beyond them and a few facts loads the tokenizer here after all, and so does any failure of the
helper's: a refusal is always this process's own. On an H200 host `acceptance` at 512 x 512 took 21.3-22.4 s with
it against 23.4-23.7 s without, in alternating pairs (bench/RESULTS.md, 2026-12-05)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput, DoctorError
from ..io.hub import first_line as _first_line
from ..io.safeio import read_json_object


def load_tokenizer(
    name_or_path: str, trust_remote_code: bool, by_class: bool = False, what: str = "target tokenizer", untrusted_fix: str = ""
) -> Any:
    """The target's tokenizer, every refusal one error line (a tokenizer.json that does not parse among them).
    ``by_class``: first by the class its tokenizer_config.json names (``load_tokenizer_class``), without
    transformers' auto module and the modeling stack it imports; AutoTokenizer where that gives none. ``what`` names
    it in the refusals; ``untrusted_fix``: the fix for a tokenizer that brings its own code, where the caller has no
    --trust-remote-code to offer."""
    try:
        tok = None
        if by_class:
            tok = load_tokenizer_class(name_or_path)
        if tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
        tok("probe", add_special_tokens=False)  # a config value read only at the first call (model_max_length) fails here
        return tok
    except (OSError, ValueError) as e:
        raise remote_code_refused(e, what, name_or_path, trust_remote_code, untrusted_fix) or BadInput(
            f"cannot load the {what} {name_or_path!r}: {_first_line(e)}", "the directory needs tokenizer files"
        ) from None
    except (DoctorError, MemoryError):  # a refusal already said in one line (a config that is not JSON), or no memory
        raise
    except BaseException as e:  # noqa: BLE001 - the files' own fault, whatever the library calls it
        # the tokenizers library reports a tokenizer.json it cannot deserialize as a bare Exception, and one whose
        # entries contradict each other (an added token's id past the vocabulary) as a Rust panic at the first
        # encode, pyo3's PanicException, a BaseException; Jinja a chat template that does not compile as a
        # TemplateError, huggingface_hub a config value of the wrong type as its own error: each is the files'
        # fault, not a bug here (exit 3 said so)
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise  # an interrupt, an exit: not the files'
        raise BadInput(
            f"cannot load the {what} {name_or_path!r}: {type(e).__name__}: {_first_line(e)}",
            "restore the tokenizer files (tokenizer.json, tokenizer_config.json, the chat template) from the model's release",
        ) from None


def load_tokenizer_class(path: str) -> Any | None:
    """The tokenizer its tokenizer_config.json names, loaded by that transformers class directly: the class
    AutoTokenizer picks, without the auto module, which imports the whole modeling stack in transformers
    5.17 (9 s on an H200 host). None where the config names no class, brings its own code, or the
    installed transformers has no such tokenizer class."""
    p = Path(path) / "tokenizer_config.json"
    if not p.is_file() or not (Path(path) / "tokenizer.json").is_file():
        return None
    tc = read_json_object(p, "restore tokenizer_config.json")
    name = tc.get("tokenizer_class")
    if not isinstance(name, str) or not name.isidentifier() or "auto_map" in tc:
        return None
    import transformers

    base = getattr(transformers, "PreTrainedTokenizerBase", None)
    for cand in ([name + "Fast"] if not name.endswith("Fast") else []) + [name]:
        try:
            cls = getattr(transformers, cand, None)  # the lazy module imports that tokenizer's file alone
        except (ImportError, RuntimeError):  # a class whose backend (sentencepiece...) is not installed
            cls = None
        if isinstance(cls, type) and base is not None and issubclass(cls, base):
            tok: Any = cls
            return tok.from_pretrained(path, trust_remote_code=False)
    return None


def remote_code_refused(e: BaseException, what: str, name: str, trusted: bool, fix: str = "") -> BadInput | None:
    """transformers refusing a checkpoint's own Python (auto_map) because it was not trusted, said plainly."""
    if trusted or "trust_remote_code" not in str(e):
        return None
    return BadInput(
        f"the {what} {name} needs its own Python code (auto_map in its config), which is not run unless asked",
        fix or "pass --trust-remote-code if you trust that code",
    )


# --------------------------------------------------------------------------- ahead, in a helper process

# what a measurement reads of the tokenizer besides its prompts' ids (eos_and_pad, the chat-template checks)
FACTS = ("eos_token_id", "pad_token_id", "bos_token_id", "chat_template", "name_or_path")


@dataclass
class _Helper:
    name: str
    key: tuple[str | None, int | None]  # the prompts file and --limit it tokenized
    proc: subprocess.Popen[bytes]


_HELPERS: list[_Helper] = []


def start(name: str, prompts: str | None, limit: int | None) -> None:
    """Start the helper for a local target directory whose tokenizer files are there; nothing where transformers
    is imported already (its load here costs little then: a test process) or ``EAGLE3_DOCTOR_TOKENIZE_AHEAD=0``."""
    d = Path(name)
    if "transformers" in sys.modules or os.environ.get("EAGLE3_DOCTOR_TOKENIZE_AHEAD", "1") == "0":
        return
    if not ((d / "tokenizer.json").is_file() and (d / "tokenizer_config.json").is_file()) or not sys.executable:
        return  # no local tokenizer files, or no interpreter to start (an embedded Python)
    key = (None if prompts is None else str(prompts), limit)
    root = str(Path(__file__).resolve().parents[2])  # the package's own, whatever the child's working directory
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    code = "from eagle3_doctor.model.tokenizer import helper; helper()"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps({"name": name, "prompts": key[0], "limit": limit})],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    except OSError:
        return  # no process to spare: the tokenizer loads here, as before
    if not _HELPERS:
        import atexit

        atexit.register(_stop_all)
    _HELPERS.append(_Helper(_same(name), key, proc))


def _same(name: str) -> str:
    """One spelling of a target directory, however the command and the loader wrote it (relative, a link)."""
    return str(Path(name).resolve())


def started(name: str) -> bool:
    return any(h.name == _same(name) for h in _HELPERS)


def taken(name: str) -> AheadTokenizer | None:
    """The helper's tokenizer for ``name``, waiting for it; None where no helper read it or it failed: the caller
    loads it here, and a refusal is made by this process's own load, in its own words (a failure in the helper may
    be the helper's, which runs without torch)."""
    h = next((h for h in _HELPERS if h.name == _same(name)), None)
    if h is None:
        return None
    _HELPERS.remove(h)
    try:
        out, _ = h.proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        h.proc.kill()
        h.proc.communicate()
        return None
    try:
        answer = json.loads(out) if h.proc.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not {"facts", "len", "rows"} <= answer.keys():
        return None
    return AheadTokenizer(name, h.key, answer)


def _stop_all() -> None:
    for h in _HELPERS:
        h.proc.kill()
    _HELPERS.clear()


def helper() -> None:
    """The helper process: the tokenizer loaded and the prompts tokenized, one JSON object on stdout; any failure
    (a refusal among them) exits 1 with no answer, and the command loads and refuses in its own process.

    torch is made unimportable here: the ids go back as Python lists, which need none of it, while transformers
    5.17's tokenizer module imports its GGUF loader and through it torch (3.4 s of the helper's 5 s on an H200
    host, bench/RESULTS.md 2026-12-05); transformers without torch is one of its supported installs."""
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    from ..io.prompts import tokenized

    args = json.loads(sys.argv[1])
    out, sys.stdout = sys.stdout, sys.stderr  # nothing a library prints may reach the answer
    tok = load_tokenizer(args["name"], False, by_class=True)
    answer = {"facts": {k: getattr(tok, k, None) for k in FACTS}, "len": len(tok)}
    answer["rows"] = tokenized(tok, args["prompts"], args["limit"])
    out.write(json.dumps(answer))
    out.flush()


class AheadTokenizer:
    """The target's tokenizer as the helper loaded it: the run's prompts tokenized, the facts a measurement reads,
    its length; anything else loads the tokenizer in this process, once, as ``load_tokenizer`` would."""

    def __init__(self, name: str, key: tuple[str | None, int | None], answer: dict[str, Any]):
        self._name, self._key, self._facts, self._len = name, key, dict(answer["facts"]), int(answer["len"])
        self._rows: list[tuple[str, list[int]]] = answer["rows"]
        self._real: Any = None

    def tokenized_ahead(self, path: str | Path | None, limit: int | None) -> list[tuple[str, list[int]]] | None:
        """Each prompt's text and ids (``io.prompts.tokenized``) where the helper read this file with this limit."""
        if (None if path is None else str(path), limit) != self._key:
            return None
        return [(str(text), [int(i) for i in ids]) for text, ids in self._rows]

    def loaded(self) -> Any:
        if self._real is None:
            self._real = load_tokenizer(self._name, False, by_class=True)
        return self._real

    def __len__(self) -> int:
        return self._len

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.loaded()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        facts = self.__dict__.get("_facts")
        if facts is not None and attr in facts:
            return facts[attr]
        if attr.startswith("__") or facts is None:
            raise AttributeError(attr)
        return getattr(self.loaded(), attr)
