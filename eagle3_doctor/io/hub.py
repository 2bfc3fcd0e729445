"""Models from where users keep them: local directories, or hub ids (optionally at a --revision).

Hub ids go through ``huggingface_hub.snapshot_download``, which honours the local cache
(``HF_HOME`` / ``HF_HUB_CACHE``), the token (``HF_TOKEN`` or ``huggingface-cli login``) and offline
mode (``HF_HUB_OFFLINE=1``: only what is cached). A name that looks like a path (absolute, ``./``,
``../``, ``~``, more than one ``/``, or an existing file) is never sent to the hub.

Draft weights: every ``*.safetensors`` (or only the shards a ``model.safetensors.index.json``
names), else ``pytorch_model.bin`` / its sharded index, loaded with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .checks import looks_local

# enough to run a target or draft: configs, tokenizer, chat template, weights (no remote code)
_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "tokenizer*", "*.model", "*.tiktoken", "*.txt"]


def offline_state() -> str:
    """HF_HUB_OFFLINE as this process sees it: 'unset' is not '0', and a user debugging a cache miss
    needs to know which."""
    v = os.environ.get("HF_HUB_OFFLINE")
    return "HF_HUB_OFFLINE unset" if v is None else f"HF_HUB_OFFLINE={v}"


def resolve(name: str, revision: str | None = None, what: str = "model") -> str:
    """A local directory holding ``name`` (downloading a hub id into the HF cache when needed)."""
    p = Path(os.path.expanduser(name))
    if p.is_dir():
        if revision:
            import sys

            print(
                f"eagle3-doctor: note: {what} {name} is a local directory; revision {revision} not applied",
                file=sys.stderr,
                flush=True,
            )
        return str(p)
    if looks_local(name):
        raise BadInput(f"{what} directory {name} does not exist", "pass an existing directory or a hub id like org/name")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        raise BadInput(
            f"{name} is not a local directory and huggingface_hub is not installed",
            "pip install huggingface_hub, or pass a local directory",
        ) from None
    try:
        local = snapshot_download(name, revision=revision, allow_patterns=_PATTERNS)
        if not any(Path(local).glob("*.safetensors")):
            # only pickled weights in this repo: fetch them too (loaded with weights_only=True)
            local = snapshot_download(name, revision=revision, allow_patterns=_PATTERNS + ["*.bin"])
    except RevisionNotFoundError:
        raise BadInput(f"revision {revision!r} of {name} does not exist on the hub", "pass a branch, tag or commit") from None
    except RepositoryNotFoundError:
        raise BadInput(
            f"hub repository {name} not found (or private without a token)",
            "check the id, or set HF_TOKEN / run huggingface-cli login",
        ) from None
    except LocalEntryNotFoundError:
        cached = cached_revisions(name)
        if cached:
            flag = {"target": "--revision", "draft": "--draft-revision"}.get(what, "the revision")
            raise BadInput(
                f"{name} is in the local Hugging Face cache, but not at revision {revision or 'main'!r}, and the hub "
                f"cannot be reached ({offline_state()}); cached: {', '.join(cached)}",
                f"pass {flag} with a cached revision, or download {revision or 'main'} once with network access",
            ) from None
        raise BadInput(
            f"{name} is not in the local Hugging Face cache and the hub cannot be reached ({offline_state()})",
            "download it once with network access, or pass a local directory",
        ) from None
    except Exception as e:  # network stacks differ by huggingface_hub version (requests, httpx): one line for all
        first = (str(e).splitlines() or [type(e).__name__])[0][:160]
        raise BadInput(
            f"cannot download {name} from the hub ({first})", "check network access and the id, or pass a local directory"
        ) from None
    return local


def cached_revisions(name: str, limit: int = 8) -> list[str]:
    """The revisions of hub model ``name`` the local cache holds, as huggingface_hub lays it out
    (``models--org--name/refs/<branch or tag>`` holding a commit, ``snapshots/<commit>/``): each ref as
    ``ref (commit[:12])``, then commits no ref names; empty when the repository is not cached at all."""
    import huggingface_hub.constants as hf

    root = Path(hf.HF_HUB_CACHE) / ("models--" + name.replace("/", "--"))
    snaps = root / "snapshots"
    if not snaps.is_dir():
        return []
    commits = sorted(p.name for p in snaps.iterdir() if p.is_dir())
    out, named = [], set()
    refs = root / "refs"
    for ref in sorted(refs.rglob("*")) if refs.is_dir() else []:
        try:
            sha = ref.read_text().strip() if ref.is_file() else ""
        except OSError:
            continue
        if sha in commits:  # a ref whose snapshot is gone cannot be loaded offline
            out.append(f"{ref.relative_to(refs).as_posix()} ({sha[:12]})")
            named.add(sha)
    out += [c[:12] for c in commits if c not in named]
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def read_local_config(name_or_path: str) -> dict[str, Any] | None:
    """A local target directory's config.json, checked before anything is built from it; None if the path does not exist."""
    p = Path(name_or_path)
    if not p.exists():
        return None
    if not p.is_dir():
        raise BadInput(f"--target {p} is a file, not a model directory", "point --target at the directory with config.json")
    from .checks import check_target
    from .safeio import read_json_object

    cfg = p / "config.json"
    data = read_json_object(cfg, "point --target at a Hugging Face model directory (config.json + weights)")
    if "num_hidden_layers" not in data and "n_layer" not in data and not isinstance(data.get("text_config"), dict):
        raise BadInput(f"{cfg} lacks num_hidden_layers", "restore config.json from the original checkpoint")
    # types, sizes bounded by the layers the weights hold, weight files regular with sane headers:
    # before transformers builds anything (a 10^9-layer config would build for hours)
    check_target(str(p))
    return data


def config_if_local(path: str | None) -> dict[str, Any] | None:
    """A local model directory's config.json as a mapping, read leniently where a launch command names the model:
    None where it is not one here (a hub id, a missing or unreadable file, not a mapping). Never opens a FIFO: the
    preflight says what such a path is."""
    if not path:
        return None
    p = Path(os.path.expanduser(path)) / "config.json"
    if not p.is_file():
        return None
    try:
        cfg = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[0] if lines else type(e).__name__)[:200]


def hub_fix(name: str) -> str:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return f"HF_HUB_OFFLINE is set and {name} is not in the local cache: download it first or pass a local directory"
    return "check the path or hub id (and network access for hub ids)"


def _index_files(directory: Path, index_name: str) -> list[Path] | None:
    idx = directory / index_name
    if not idx.is_file():
        return None
    try:
        wm = json.loads(idx.read_text()).get("weight_map")
    except (OSError, ValueError, AttributeError):
        raise BadInput(f"{idx} is not a valid weight index", "re-download the checkpoint") from None
    if not isinstance(wm, dict) or not wm:
        raise BadInput(f"{idx} has no weight_map", "re-download the checkpoint")
    files = [directory / f for f in sorted(set(wm.values()))]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise BadInput(f"{idx} names shard(s) that are missing: {', '.join(missing[:3])}", "download every shard")
    return files


def weight_files(directory: Path) -> list[Path]:
    """The files a load of ``directory`` reads: the index's safetensors shards, else every *.safetensors,
    else the pickled .bin shards (never training_args.bin); empty when there are none."""
    files = _index_files(directory, "model.safetensors.index.json") or sorted(directory.glob("*.safetensors"))
    return (
        files
        or _index_files(directory, "pytorch_model.bin.index.json")
        or sorted(f for f in directory.glob("*.bin") if f.name != "training_args.bin")
    )


def tensor_shapes(d: Path) -> dict[str, list[int]]:
    """{name: shape} of every tensor a safetensors directory holds, from the headers alone (a target's shards are never
    read), each header checked as every reader checks it; {} where the directory has no weights."""
    from .safeio import check_safetensors_header

    shapes: dict[str, list[int]] = {}
    try:
        files = weight_files(d)
    except Exception:  # no weights at all: the format readers say so in their own words
        return shapes
    for f in files:
        if f.suffix == ".safetensors":
            shapes.update({k: list(v.get("shape", [])) for k, v in check_safetensors_header(f).items() if k != "__metadata__"})
    return shapes


EMBED_NAMES = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight",
               "language_model.model.embed_tokens.weight", "transformer.wte.weight")  # fmt: skip


def embedding_row(directory: Path, row: int) -> tuple[Any, int] | None:
    """(row ``row`` of the input embedding in float32, the embedding's rows): only that tensor's header read and
    that row's bytes touched; None where no safetensors file holds an embedding under a known name."""
    from . import safeio
    from .arrays import StoredArray

    for f in weight_files(directory):
        if f.suffix != ".safetensors":
            continue
        names = safeio.check_safetensors_header(f)
        name = next((n for n in EMBED_NAMES if n in names), None)
        if name is None:
            continue
        arr = safeio.read_array(f, name)
        rows = int(arr.shape[0])
        if not 0 <= row < rows:
            return None, rows
        return StoredArray(arr.raw[row], arr.dtype).values(), rows
    return None


def load_weights_dir(directory: Path) -> dict[str, Any]:
    """Tensors of a checkpoint directory as {name: StoredArray}: safetensors (sharded or not) first,
    read without torch, else pickled .bin, which only torch can unpickle (weights_only)."""
    from . import safeio

    files = weight_files(directory)
    if not files:
        raise BadInput(
            f"no *.safetensors or pytorch_model.bin in {directory}", "point --draft at the directory holding the draft's weights"
        )
    out: dict[str, Any] = {}
    for f in files:
        if f.suffix == ".safetensors":
            out.update(safeio.load_arrays(f))
            continue
        sd = safeio.load_pickle(f)  # torch.load(weights_only=True)
        if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
            sd = sd["state_dict"]
        if not isinstance(sd, dict):
            raise BadInput(f"{f} holds no state dict", "save the draft with model.state_dict() or as safetensors")
        from .arrays import from_torch

        out.update({k: from_torch(v) for k, v in sd.items() if hasattr(v, "is_floating_point")})
    return out


def role_paths(
    target: str | None = None,
    draft: str | None = None,
    *,
    target_dir: str | None = None,
    draft_dir: str | None = None,
    serve_config: str | None = None,
) -> dict[str, str]:
    """The files behind the roles findings name (``findings.Location.file``), as this run used them.

    ``target`` and ``draft`` are the names as given, ``*_dir`` the local directory each was loaded
    from (default: the name, when it is a directory). A local model's files are named by absolute
    path; a hub model's as ``org/name:FILE``, the repository's file, since the cached snapshot is not
    the copy to edit. The draft's weights are the one file loaded, or ``DIR/*.safetensors`` for
    shards. The launch command is the --serve-config file when one was given (a --serve-cmd string is
    no file); a role this run has no file for is left out.
    """
    from ..core.findings import DRAFT_WEIGHTS, SERVER_COMMAND

    out: dict[str, str] = {}
    if serve_config:
        out[SERVER_COMMAND] = os.path.abspath(os.path.expanduser(serve_config))
    for role, name, local in (("target", target, target_dir), ("draft", draft, draft_dir)):
        if not name:
            continue
        out[f"{role}/config.json"] = _model_file(name, "config.json")
        given = Path(os.path.expanduser(name))
        home = given if given.is_dir() else Path(local) if local else None
        if role == "draft" and home is not None and home.is_dir():
            files = weight_files(home)
            if len(files) == 1:
                out[DRAFT_WEIGHTS] = _model_file(name, files[0].relative_to(home).as_posix())
            elif files:
                out[DRAFT_WEIGHTS] = _model_file(name, "*" + files[0].suffix)
    return out


def _model_file(name: str, rel: str) -> str:
    """A file of the model ``name``: its absolute path for a local directory, ``org/name:rel`` for a hub id."""
    given = Path(os.path.expanduser(name))
    return os.path.abspath(given / rel) if given.is_dir() else f"{name}:{rel}"
