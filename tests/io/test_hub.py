"""Models from where users keep them: hub ids through the HF cache (offline here), revisions,
local-looking names never sent to the hub, pytorch_model.bin and sharded safetensors drafts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, TARGET

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.draft.formats import read_draft
from eagle3_doctor.io.hub import looks_local, resolve

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def offline_cache(tmp_path, monkeypatch):
    """A Hugging Face cache holding org/draft at main (= SHA) and nothing else; the hub unreachable."""
    import huggingface_hub.constants as C

    cache = tmp_path / "hf"
    snap = cache / "models--org--draft" / "snapshots" / SHA
    snap.mkdir(parents=True)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(DRAFTS["sglang"] / f, snap)
    (cache / "models--org--draft" / "refs").mkdir()
    (cache / "models--org--draft" / "refs" / "main").write_text(SHA)
    monkeypatch.setattr(C, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(C, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return snap


def test_hub_id_resolves_from_the_cache_offline(offline_cache):
    assert resolve("org/draft") == str(offline_cache)
    assert resolve("org/draft", SHA) == str(offline_cache)
    with pytest.raises(BadInput, match="not in the local Hugging Face cache"):
        resolve("org/missing")
    d, info = read_draft(resolve("org/draft"))
    assert info.format == "sglang"


@pytest.mark.parametrize("name", ["/no/such/dir", "./nope", "../nope", "~/nope", "a/b/c", "C:\\models\\x"])
def test_local_looking_names_never_reach_the_hub(name, monkeypatch):
    import huggingface_hub

    def boom(*a, **k):
        raise AssertionError("a local-looking path was sent to the hub")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", boom)
    assert looks_local(name)
    with pytest.raises(BadInput, match="does not exist"):
        resolve(name)


def test_hub_like_names():
    assert not looks_local("org/name") and not looks_local("gpt2")
    assert resolve(str(TARGET)) == str(TARGET)


def _logits(d):
    torch.manual_seed(0)
    H = d.config.target_hidden_size
    aux = torch.randn(1, 5, d.config.num_aux_states * H)
    d.set_embeddings(torch.randn(d.config.vocab_size, d.config.hidden_size), own=False)
    h = next(d.unroll(aux, torch.tensor([[1, 2, 3, 4, 5]]), 1))
    return d.logits(h)


def test_pytorch_model_bin_draft_loads_weights_only(tmp_path):
    from safetensors.torch import load_file

    src = DRAFTS["sglang"]
    dst = tmp_path / "bin-draft"
    dst.mkdir()
    shutil.copy(src / "config.json", dst)
    torch.save(load_file(src / "model.safetensors"), dst / "pytorch_model.bin")
    a, _ = read_draft(src)
    b, _ = read_draft(dst)
    torch.testing.assert_close(_logits(a), _logits(b), rtol=0, atol=0)

    # a pickle that is more than tensors is refused, not executed
    class Evil:
        def __reduce__(self):
            return (print, ("executed",))

    torch.save({"x": Evil()}, dst / "pytorch_model.bin")
    with pytest.raises(BadInput):
        read_draft(dst)


def test_sharded_safetensors_index(tmp_path):
    from safetensors.torch import load_file, save_file

    src = DRAFTS["sglang"]
    sd = load_file(src / "model.safetensors")
    dst = tmp_path / "sharded"
    dst.mkdir()
    shutil.copy(src / "config.json", dst)
    names = sorted(sd)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for fname, keys in parts.items():
        save_file({k: sd[k].contiguous() for k in keys}, dst / fname)
    (dst / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {k: f for f, ks in parts.items() for k in ks}})
    )
    # a stale file the index does not name is not read
    save_file({"lm_head.weight": torch.zeros_like(sd["lm_head.weight"])}, dst / "zz-stale.safetensors")
    a, _ = read_draft(src)
    b, _ = read_draft(dst)
    torch.testing.assert_close(_logits(a), _logits(b), rtol=0, atol=0)
    (dst / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(BadInput, match="missing"):
        read_draft(dst)


# --------------------------------------------------------------------------- hub ids through the CLI


def _cache_model(hub: Path, repo: str, src: Path, sha: str = SHA) -> Path:
    """``repo`` at main (= sha) in a Hugging Face cache laid out as huggingface_hub writes it."""
    root = hub / ("models--" + repo.replace("/", "--"))
    snap = root / "snapshots" / sha
    snap.mkdir(parents=True)
    for f in src.iterdir():
        shutil.copy(f, snap)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(sha)
    return snap


def _run_offline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, so that huggingface_hub reads HF_HOME and HF_HUB_OFFLINE as a user's shell sets them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "eagle3_doctor", *args], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


@pytest.fixture()
def hf_home(tmp_path):
    hub = tmp_path / "hf-home" / "hub"
    _cache_model(hub, "org/name", DRAFTS["sglang"])
    _cache_model(hub, "org/target", TARGET)
    return hub


def test_cli_draft_hub_id_resolves_offline(tmp_path, hf_home):
    r = _run_offline(
        tmp_path, "inspect", "--target", str(TARGET), "--draft", "org/name", "--engine", "sglang", "--json", "i.json"
    )
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads((tmp_path / "i.json").read_text())
    assert doc["draft"]["path"] == str(hf_home / "models--org--name" / "snapshots" / SHA)
    assert doc["draft"]["format"] == "sglang"


def test_cli_serve_cmd_naming_hub_ids_resolves_offline(tmp_path, hf_home):
    cmd = (
        "python -m sglang.launch_server --model-path org/target --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path org/name --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4"
    )
    r = _run_offline(tmp_path, "inspect", "--serve-cmd", cmd, "--json", "i.json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads((tmp_path / "i.json").read_text())
    assert doc["target"]["path"] == str(hf_home / "models--org--target" / "snapshots" / SHA)
    assert doc["draft"]["path"] == str(hf_home / "models--org--name" / "snapshots" / SHA)


def test_cli_uncached_hub_id_is_one_line(tmp_path, hf_home):
    r = _run_offline(tmp_path, "inspect", "--target", str(TARGET), "--draft", "org/not-cached")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1 and "org/not-cached" in lines[0] and "HF_HUB_OFFLINE=1" in lines[0], lines


def test_cached_hub_draft_is_checked_like_a_local_one(tmp_path, monkeypatch):
    """A snapshot whose config is broken is refused as a local draft would be, not loaded."""
    import huggingface_hub.constants as C

    from eagle3_doctor.cli.validate import check_resolved

    snap = _cache_model(tmp_path / "hub", "org/bad", DRAFTS["sglang"])
    (snap / "config.json").write_text('{"num_hidden_layers": "one"}')
    monkeypatch.setattr(C, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(C, "HF_HUB_OFFLINE", True)
    with pytest.raises(BadInput, match="num_hidden_layers"):
        check_resolved("org/bad", resolve("org/bad"), "draft")


def test_offline_state_says_unset(monkeypatch):
    from eagle3_doctor.io.hub import offline_state

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert offline_state() == "HF_HUB_OFFLINE unset"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert offline_state() == "HF_HUB_OFFLINE=0"


# where the two answers to "is this a local path?" used to disagree: the one left decides for every caller
@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("org--x/y", True),  # "--" is the hub cache's separator, never in a repo id
        ("x/", True),
        ("org/na me", True),
        ("org/../x", True),
        (".hidden/x", True),
        ("a/b/c", True),
        ("org/name", False),
        ("gpt2", False),
        ("meta-llama/Llama-3.1-8B-Instruct", False),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", False),
    ],
)
def test_one_answer_to_is_this_a_local_path(name, local):
    from eagle3_doctor.io import checks, hub

    assert hub.looks_local is checks.looks_local
    assert checks.looks_local(name) is local


# ----------------------------------------------------------------------------- the real files behind a finding's roles


def _render(findings) -> str:
    from rich.console import Console

    from eagle3_doctor.report.render import render_findings

    con = Console(record=True, width=200, color_system=None)
    render_findings(con, findings, "ok")
    return con.export_text()


def test_role_paths_local_hub_shards_and_roles_without_a_file(tmp_path, monkeypatch):
    from eagle3_doctor.core.findings import DRAFT_CONFIG, DRAFT_WEIGHTS, REQUEST, SERVER_COMMAND, Finding, Fix, config_fix, locate
    from eagle3_doctor.io.hub import role_paths
    from eagle3_doctor.report.render import findings_markdown

    serve = tmp_path / "serve.sh"
    serve.write_text("python -m sglang.launch_server --model-path org/target\n")
    draft = DRAFTS["sglang"]
    p = role_paths("org/target", str(draft), serve_config=str(serve))
    assert p == {
        "target/config.json": "org/target:config.json",
        DRAFT_CONFIG: os.path.abspath(draft / "config.json"),
        DRAFT_WEIGHTS: os.path.abspath(draft / "model.safetensors"),
        SERVER_COMMAND: os.path.abspath(serve),
    }
    # a hub draft, downloaded to a snapshot: the repository's files, not the cache's copies
    assert role_paths(draft="org/draft", draft_dir=str(draft)) == {
        DRAFT_CONFIG: "org/draft:config.json",
        DRAFT_WEIGHTS: "org/draft:model.safetensors",
    }
    shards = tmp_path / "sharded"
    shards.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (shards / name).write_bytes(b"")
    assert role_paths(draft=str(shards))[DRAFT_WEIGHTS] == os.path.join(os.path.abspath(shards), "*.safetensors")

    fs = [
        Finding("CFG003", "t", [], config_fix("x", "rope_theta", 1.0)),
        Finding("TPL003", "t", [], Fix("x", file=REQUEST, key="messages[0]")),
        Finding("CAP006", "t", [], "text"),
    ]
    locate(fs, role_paths(draft=str(draft)))  # no --serve-config: no file for the launch command or a request
    assert str(fs[0].location) == f"{os.path.abspath(draft / 'config.json')}: rope_theta"
    assert fs[0].edit.path == fs[0].location.path and fs[0].location.file == DRAFT_CONFIG
    assert fs[1].location.path is None and str(fs[1].location) == "each chat request: messages[0]"
    assert fs[2].location is None
    # the terminal shows it as rustc and ruff do: relative to the working directory when below it
    monkeypatch.chdir(draft.parent.parent)
    assert _render(fs[:1]).splitlines()[1] == f" --> {draft.parent.name}/{draft.name}/config.json: rope_theta"
    monkeypatch.chdir(tmp_path)
    assert _render(fs[:1]).splitlines()[1] == f" --> {os.path.abspath(draft / 'config.json')}: rope_theta"
    assert f"`{os.path.abspath(draft / 'config.json')}: rope_theta`" in findings_markdown(fs[:1])


def test_missing_revision_of_a_cached_repo_names_the_cached_ones(offline_cache):
    root = offline_cache.parent.parent
    other = "fedcba9876543210fedcba9876543210fedcba98"
    (root / "snapshots" / other).mkdir()
    (root / "refs" / "v1").write_text(other)
    with pytest.raises(BadInput) as e:
        resolve("org/draft", "v9", "draft")
    msg = str(e.value)
    assert "in the local Hugging Face cache, but not at revision 'v9'" in msg and "HF_HUB_OFFLINE=1" in msg
    assert f"cached: main ({SHA[:12]}), v1 ({other[:12]})" in msg
    assert "--draft-revision" in e.value.fix
    # a repository not cached at all still says so
    with pytest.raises(BadInput, match="not in the local Hugging Face cache"):
        resolve("org/missing", "v9", "draft")


def test_cli_draft_revision_missing_from_the_cache_is_one_line(tmp_path, hf_home):
    r = _run_offline(tmp_path, "inspect", "--target", str(TARGET), "--draft", "org/name", "--draft-revision", "v9")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "not at revision 'v9'" in lines[0] and f"cached: main ({SHA[:12]})" in lines[0], lines
