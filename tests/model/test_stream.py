"""--stream-layers: the target replayed one decoder layer at a time gives the unstreamed run's captures
bit for bit (float32, same batches), reads every weight once per pass and holds one layer at a time."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET, invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import all_points
from eagle3_doctor.doctor import acceptance, compare_hidden, load_setup
from eagle3_doctor.model.replay import iter_captures, prompt_sequences
from eagle3_doctor.model.stream import StreamedTarget, load_streamed_target, should_stream

N = 8  # prompts replayed; one batch of all of them in both runs, so the forwards are the same ops


def _setups(target=TARGET):
    base = dict(target=str(target), draft=str(DRAFTS["sglang"]), dtype="float32", device="cpu", layer_ids=[-1, 1, 3])
    return load_setup(**base), load_setup(stream_layers=True, **base)


@pytest.fixture(scope="module")
def pair():
    return _setups()


def _captures(tgt, seqs, batch_size):
    out = {}
    for rb in iter_captures(tgt, seqs, all_points(tgt.num_layers), batch_size=batch_size, want_logits=True):
        for b, i in enumerate(rb.index):
            n = rb.batch.lengths[b]
            out[i] = {**{p: v[b, :n] for p, v in rb.captured.items()}, "last": rb.last[b, :n]}
    return out


def test_streamed_captures_are_bitwise_the_unstreamed_ones(pair):
    plain, streamed = pair
    assert isinstance(streamed.target, StreamedTarget)
    assert streamed.target.model.model.layers[3].mlp.up_proj.weight.device.type == "meta"  # really not resident
    prompts, _ = prompt_sequences(plain.target, str(PROMPTS), 512, N)
    seqs = [p.ids for p in prompts]
    a, b = _captures(plain.target, seqs, N), _captures(streamed.target, seqs, N)
    assert a.keys() == b.keys() and len(a) == N
    for i in a:
        assert a[i].keys() == b[i].keys()
        for k in a[i]:
            assert torch.equal(a[i][k], b[i][k]), (i, k)


def test_streamed_findings_and_acceptance_equal_unstreamed(pair):
    plain, streamed = pair
    a = compare_hidden(plain, prompts_path=str(PROMPTS), limit=N, batch_size=N, matrix=True)
    b = compare_hidden(streamed, prompts_path=str(PROMPTS), limit=N, batch_size=N, matrix=True)
    assert [f.code for f in a.findings] == [f.code for f in b.findings] == ["CAP002"]
    assert [f.to_dict() for f in a.findings] == [f.to_dict() for f in b.findings]
    assert [s.rel_mean for s in a.slots] == [s.rel_mean for s in b.slots]
    assert a.matrix.rel_l2 == b.matrix.rel_l2
    assert any("read from disk 1 time(s)" in n for n in b.notes)
    kw = dict(prompts_path=str(PROMPTS), limit=N, batch_size=N, num_steps=4, continuation="text")
    ra, rb = acceptance(plain, **kw), acceptance(streamed, **kw)
    for path in ("serving", "training"):
        assert ra.paths[path].accepted_lengths == rb.paths[path].accepted_lengths
        assert ra.paths[path].acc_k == rb.paths[path].acc_k
    assert [f.to_dict() for f in ra.findings] == [f.to_dict() for f in rb.findings]


def test_each_weight_is_read_once_per_pass_and_one_layer_is_resident(pair):
    _, streamed = pair
    tgt = streamed.target
    layers = tgt.parts.layers
    seen = []

    def count(_m, _a):  # registered after the streamer's own pre-hook: the layer about to run is in
        seen.append(sum(any(p.device.type != "meta" for p in lay.parameters()) for lay in layers))

    handles = [lay.register_forward_pre_hook(count) for lay in layers]
    try:
        compare_hidden(streamed, prompts_path=str(PROMPTS), limit=N, batch_size=N)
        s = tgt.streamer
        layer_tensors = {c for names in s.names.values() for c in names.values()}
        assert len(layer_tensors) == 8 * 9  # 8 layers of q/k/v/o, gate/up/down and two norms
        assert s.passes == 1 and {s.files.reads[c] for c in layer_tensors} == {1}
        assert seen == [1] * 8 and s.max_resident == 1
        # forced into groups of 3: the weights are read once per group, and the output says so
        res = compare_hidden(streamed, prompts_path=str(PROMPTS), limit=N, batch_size=3)
        assert s.passes == math.ceil(N / 3) and {s.files.reads[c] for c in layer_tensors} == {3}
        assert any("read from disk 3 time(s)" in n for n in res.notes)
        assert max(seen) == 1
    finally:
        for h in handles:
            h.remove()
    assert all(p.device.type == "meta" for p in layers.parameters())  # nothing left behind after the replay


def test_tied_head_stored_once_streams_like_from_pretrained(tmp_copy):
    from safetensors.torch import load_file, save_file

    d = tmp_copy(TARGET, "tied")
    sd = load_file(str(d / "model.safetensors"))
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()  # what a tied model computes with
    save_file({k: v for k, v in sd.items() if k != "lm_head.weight"}, str(d / "model.safetensors"))
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    plain, streamed = _setups(d)
    head = streamed.target.model.get_output_embeddings().weight
    assert head.device.type == "cpu" and torch.equal(head, plain.target.model.get_output_embeddings().weight)
    kw = dict(prompts_path=str(PROMPTS), limit=4, batch_size=4, num_steps=3, continuation="text")
    assert acceptance(plain, **kw).paths["serving"].acc_k == acceptance(streamed, **kw).paths["serving"].acc_k


def test_streaming_refuses_what_it_cannot_do(tmp_copy, pair):
    _, streamed = pair
    with pytest.raises(BadInput, match="token by token"):
        acceptance(streamed, prompts_path=str(PROMPTS), limit=2, num_steps=2, max_new_tokens=4)
    q = tmp_copy(TARGET, "quantized")
    cfg = json.loads((q / "config.json").read_text())
    (q / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "fp8"}}))
    with pytest.raises(BadInput, match="quantized"):
        load_streamed_target(str(q), device="cpu")
    b = tmp_copy(TARGET, "no-safetensors")
    (b / "model.safetensors").unlink()
    with pytest.raises(BadInput, match="holds none"):
        load_streamed_target(str(b), device="cpu")
    assert should_stream(str(TARGET), "auto", "cpu") == (False, None)  # the CPU never streams on its own


def test_cli_stream_layers(tmp_path):
    common = ["--target", TARGET, "--draft", DRAFTS["sglang"], "--layer-ids", "-1,1,3", "--limit", 4, "--device", "cpu", "-q"]
    r = invoke("acceptance", *common, "--stream-layers")
    assert r.exit_code == 2 and "--continuation text" in r.output and "Traceback" not in r.output
    r = invoke("compare-hidden", *common, "--stream-layers", "--device-map", "auto")
    assert r.exit_code == 2 and "--device-map" in r.output
    plain = invoke("compare-hidden", *common, "--json", tmp_path / "a.json")
    streamed = invoke("compare-hidden", *common, "--stream-layers", "--json", tmp_path / "b.json")
    assert plain.exit_code == streamed.exit_code == 1
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["findings"] == b["findings"] and a["slots"] == b["slots"]
    assert "layer-streamed replay" in streamed.output and "layer-streamed" not in plain.output
    assert any("read from disk 1 time(s)" in n for n in b["notes"])  # auto groups: the whole replay in one pass


def test_group_size_follows_the_memory_left(pair, monkeypatch):
    import dataclasses

    from eagle3_doctor.model import stream

    _, streamed = pair
    gpu = dataclasses.replace(streamed.target, device=torch.device("cuda"))  # sized as on a GPU, nothing run
    layer = max(sum(p.numel() * p.element_size() for p in lay.parameters()) for lay in gpu.parts.layers)
    per_seq = (4 * 128 + 2 * 384 + (3 + 2) * 128) * 4 * 100  # hidden 128, intermediate 384, float32, 3 points
    monkeypatch.setattr(stream, "device_budget", lambda _d: 2 * layer + int(10 * per_seq / 0.8) + 1)
    assert stream.group_size(gpu, 100, 3) == 10
    assert stream.group_size(gpu, 50, 3) == 20  # shorter sequences, more of them per pass
    monkeypatch.setattr(stream, "device_budget", lambda _d: layer)  # not even room for the next layer
    assert stream.group_size(gpu, 100, 3) == 1
    gpu.auto_groups = True
    monkeypatch.setattr(stream, "device_budget", lambda _d: 2 * layer + int(10 * per_seq / 0.8) + 1)
    assert stream.replay_batch_size(gpu, [[1] * 100] * 25, 3, 8) == 10  # auto: the replay's own lengths decide
    assert stream.replay_batch_size(gpu, [[1] * 100] * 4, 3, 8) == 4
    gpu.auto_groups = False
    assert stream.replay_batch_size(gpu, [[1] * 100] * 25, 3, 8) == 8  # an explicit --batch-size stands


def test_the_device_budget_asks_torch_by_device_index(monkeypatch):
    """torch's per-process memory fraction refuses a device without an index ("cuda"), which is how a
    user's --device cuda arrives: the budget asks every memory query by the index."""
    import torch

    from eagle3_doctor.model import stream

    asked: list = []

    def by_index(result):
        def query(dev):
            asked.append(dev)
            if not isinstance(dev, int):
                raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{dev}")
            return result

        return query

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "mem_get_info", by_index((6 << 30, 8 << 30)))
    monkeypatch.setattr(torch.cuda, "memory_allocated", by_index(1 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", by_index(2 << 30))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", by_index(0.5), raising=False)
    assert stream.device_budget(torch.device("cuda")) == (4 << 30) - (1 << 30)  # the cap: half of 8, less 1 in use
    assert asked and all(a == 0 for a in asked)
