"""Models from where users keep them: hub ids through the HF cache (offline here), revisions,
local-looking names never sent to the hub, pytorch_model.bin and sharded safetensors drafts."""

from __future__ import annotations

import json
import shutil

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
