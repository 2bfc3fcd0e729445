"""Engine-captured hidden states (SGLang debug dumper, vLLM hidden-states extraction) against a
training dump, without loading the target. The fixture dumps were written by SGLang 0.5.23's own
dumper code and vLLM's safetensors layout (fixtures/serving/make_engine_dumps.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import DRAFTS, ROOT, SERVING
from conftest import DUMP as FIXTURE_DUMP

from eagle3_doctor.analyses.engine_dump import compare_dumps, embed_like, load_engine_dump
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import layer_out

SRV = SERVING
TRAINED = (layer_out(1), layer_out(3), layer_out(4))
DUMP = str(FIXTURE_DUMP)


def run(engine_dump: str, engine: str = "sglang"):
    return compare_dumps(
        str(SRV / engine_dump),
        DUMP,
        train_spec=TRAINED,
        train_source="the fixture draft's ids",
        engine=engine,
        engine_version=None,
        num_layers=8,
    )


def test_sglang_dumper_layout_is_read():
    ed = load_engine_dump(str(SRV / "sglang-dump-correct"))
    assert ed.format == "sglang-dumper" and len(ed.seqs) == 2
    s = ed.seqs[0]
    assert s.ids_shift == 1 and s.aux.shape == (96, 384) and s.aux.dtype == torch.bfloat16


@pytest.mark.parametrize("dump, engine", [("sglang-dump-correct", "sglang"), ("vllm-hidden-states-correct", "vllm")])
def test_correct_engine_dump_matches_training(dump, engine):
    res = run(dump, engine)
    assert [str(p) for p in res.serving.spec] == [str(p) for p in TRAINED]
    assert not any(f.severity == "error" for f in res.findings)
    # bf16 engine states against the fp32 training dump: the same capture points, a small drift
    assert all(s.rel_mean < 0.01 for s in res.slots)
    assert [f.code for f in res.findings] == ["NUM001"] and res.findings[0].severity == "info"


@pytest.mark.parametrize(
    "dump, engine, fix",
    [
        ("sglang-dump-shifted", "sglang", '"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}'),
        ("vllm-hidden-states-shifted", "vllm", '"eagle_aux_hidden_state_layer_ids": [2, 4, 5]'),
    ],
)
def test_planted_slot_shift_is_named_with_its_fix(dump, engine, fix):
    res = run(dump, engine)
    assert [str(p) for p in res.serving.spec] == ["embed", "layer_out[1]", "layer_out[3]"]
    cap = [f for f in res.findings if f.code == "CAP002"]
    assert cap and fix in cap[0].fix
    assert res.dump["embed_spread"][0] < 1e-3  # slot 0 depends only on the token id


def test_embeddings_are_recognised_by_repeated_tokens():
    emb = torch.randn(10, 8)
    ids = torch.tensor([1, 2, 1, 3, 2, 1])
    assert embed_like(emb[ids], ids) == 0.0
    ctx = emb[ids] + torch.randn(6, 8)  # anything contextual differs between repeats
    assert embed_like(ctx, ids) > 0.1
    assert embed_like(emb[torch.arange(4)], torch.arange(4)) is None


def test_mismatched_engine_dump_is_one_line_error(tmp_path):
    from safetensors.torch import save_file

    save_file(
        {"hidden_states": torch.zeros(5, 3, 128), "token_ids": torch.tensor([9, 9, 9, 9, 9])}, str(tmp_path / "r.safetensors")
    )
    with pytest.raises(BadInput, match="match no training dump sequence"):
        compare_dumps(str(tmp_path), DUMP, train_spec=TRAINED, train_source="x", engine="vllm", engine_version=None, num_layers=8)
    save_file({"hidden_states": torch.zeros(5, 384)}, str(tmp_path / "r.safetensors"))
    with pytest.raises(BadInput, match="no hidden_states/token_ids"):
        load_engine_dump(str(tmp_path))
    (tmp_path / "r.safetensors").unlink()
    with pytest.raises(BadInput, match="neither SGLang dumper files"):
        load_engine_dump(str(tmp_path))


def test_cli_dump_vs_dump_without_target():
    cmd = [
        sys.executable,
        "-m",
        "eagle3_doctor.cli.app",
        "compare-hidden",
        "--engine-dump",
        str(SRV / "sglang-dump-shifted"),
        "--train-dump",
        DUMP,
        "--draft",
        str(DRAFTS["sglang"]),
        "--engine",
        "sglang",
        "--num-layers",
        "8",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1, r.stderr
    assert "not loaded: dump vs dump" in r.stdout and "error[CAP002]" in r.stdout
    assert '"eagle_aux_hidden_state_layer_ids": [1, 3, 4]' in r.stdout
    r = subprocess.run(cmd[:-2], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "--num-layers" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("engine", [[], ["--engine", "SGLang"]])
def test_dump_vs_dump_takes_the_engine_like_the_other_paths(engine, monkeypatch):
    """--engine is optional (sglang) and any case here too, as --help says; a bad one is refused before the draft loads."""
    from conftest import invoke

    import eagle3_doctor.draft.formats as formats

    args = [
        "compare-hidden",
        "--engine-dump",
        SRV / "sglang-dump-shifted",
        "--train-dump",
        DUMP,
        "--draft",
        DRAFTS["sglang"],
        "--num-layers",
        "8",
    ]
    r = invoke(*args, *engine)
    assert r.exit_code == 1 and "error[CAP002]" in r.stdout, (r.exit_code, r.output)

    def no_load(*a, **k):
        raise AssertionError("the draft was read before the engine was checked")

    monkeypatch.setattr(formats, "read_draft", no_load)
    r = invoke(*args, "--engine", "tgi")
    assert r.exit_code == 2 and "unknown --engine 'tgi'" in r.stderr, (r.exit_code, r.output)
