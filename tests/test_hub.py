"""Models from where users keep them: hub ids through the HF cache (offline here), revisions,
local-looking names never sent to the hub."""

from __future__ import annotations

import shutil

import pytest

from conftest import DRAFTS, TARGET
from eagle3_doctor.draft.formats import read_draft
from eagle3_doctor.errors import BadInput
from eagle3_doctor.hub import looks_local, resolve

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
