"""The native Llama-family decoder computes what transformers' model computes: for each family it takes,
the features at every capture point are transformers' to the bit in float32 on ragged batches, greedy
continuations are ``generate``'s token for token, the cached decode loop's features and tokens equal;
what it does not write out (a sliding window, a stored tied head, an extra tensor) runs on transformers'
model instead, and a command on a native target never imports transformers' modeling stack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import FIX, ROOT

from eagle3_doctor.core.taps import all_points, final_norm, layer_out
from eagle3_doctor.model.continuation import _generate, greedy_continue
from eagle3_doctor.model.decode import CachedTarget
from eagle3_doctor.model.target import capture, load_target, make_batch

COMMON = dict(vocab_size=320, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=256)


def _config(family: str):
    import transformers as tf

    return {
        "llama-gqa-bias": lambda: tf.LlamaConfig(
            intermediate_size=96, num_key_value_heads=2, attention_bias=True, mlp_bias=True, rms_norm_eps=1e-5, **COMMON
        ),
        "llama3-rope": lambda: tf.LlamaConfig(
            intermediate_size=96, num_key_value_heads=1,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64}, **COMMON,
        ),
        "qwen2": lambda: tf.Qwen2Config(intermediate_size=96, num_key_value_heads=2, **COMMON),
        "qwen3-tied": lambda: tf.Qwen3Config(intermediate_size=96, num_key_value_heads=2, head_dim=24, tie_word_embeddings=True, **COMMON),
        "mistral": lambda: tf.MistralConfig(intermediate_size=96, num_key_value_heads=2, sliding_window=None, **COMMON),
    }[family]()  # fmt: skip


def _saved(tmp_path, family: str, cfg=None):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg or _config(family)).eval()
    with torch.no_grad():  # norms away from 1, biases away from 0: a skipped one shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.2)
    out = tmp_path / family
    model.save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(FIX / "target" / f, out / f)
    return out


def _both(path):
    nat = load_target(str(path), dtype="float32", device="cpu")
    hf = load_target(str(path), dtype="float32", device="cpu", forward="transformers")
    return nat, hf


def _seqs(tok, n: int) -> list[list[int]]:
    words = "def calendar module fractions import return self year width other op class".split()
    return [tok(" ".join(words[i % 5 : i % 5 + 2 + i % 7]))["input_ids"] for i in range(n)]


@pytest.mark.parametrize("family", ["llama-gqa-bias", "llama3-rope", "qwen2", "qwen3-tied", "mistral"])
def test_each_family_gives_transformers_features_and_tokens(tmp_path, family):
    nat, hf = _both(_saved(tmp_path, family))
    assert (nat.forward, hf.forward) == ("native", "transformers")
    seqs = _seqs(nat.tokenizer, 6)
    batch = make_batch(seqs, 0, torch.device("cpu"))  # right-padded, ragged: the padding mask is exercised
    pts = all_points(nat.num_layers)
    a, _ = capture(nat, batch, pts)
    b, _ = capture(hf, batch, pts)
    for p in pts:
        assert torch.equal(a[p], b[p]), (family, str(p), (a[p] - b[p]).abs().max())
    assert greedy_continue(nat, seqs, 24, 3) == _generate(hf, seqs, 24, lambda k: None)


def test_the_cached_decode_loop_gives_transformers_features_and_tokens(tmp_path):
    nat, hf = _both(_saved(tmp_path, "qwen3-tied"))
    spec = [layer_out(0), layer_out(2), final_norm()]
    prompt = torch.tensor([_seqs(nat.tokenizer, 1)[0]])
    for static in (False, True):
        x, y = CachedTarget(nat, spec, max_len=64 if static else None), CachedTarget(hf, spec)
        for i, ids in enumerate([prompt, torch.tensor([[5, 9, 11]]), torch.tensor([[7]]), torch.tensor([[7, 8]])]):
            if i == 3:  # the rejected tail of a verify pass dropped, as the loop drops it
                x.crop(x.length - 2), y.crop(y.length - 2)
            (fa, ta), (fb, tb) = x.forward(ids, last_only=i == 0), y.forward(ids, last_only=i == 0)
            assert torch.allclose(fa, fb, atol=1e-5) and torch.equal(ta, tb), (static, i)


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda cfg, d: setattr(cfg, "sliding_window", 16), "sliding-window"),
        (lambda cfg, d: None, "does not name"),  # an extra tensor in the checkpoint
    ],
    ids=["sliding-window", "extra-tensor"],
)
def test_what_the_decoder_does_not_write_out_runs_on_transformers(tmp_path, change, why):
    from eagle3_doctor.model.native.plan import native_plan

    cfg = _config("mistral")
    change(cfg, None)
    path = _saved(tmp_path, "mistral", cfg)
    if why == "does not name":
        from safetensors.torch import load_file, save_file

        sd = load_file(path / "model.safetensors")
        sd["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)
        save_file(sd, path / "model.safetensors", metadata={"format": "pt"})
    plan = native_plan(str(path), json.loads((path / "config.json").read_text()), trust_remote_code=False, device_map=None)
    assert plan.reason is not None and why in plan.reason
    assert load_target(str(path), dtype="float32", device="cpu").forward == "transformers"


def test_the_environment_can_ask_for_transformers(monkeypatch):
    monkeypatch.setenv("EAGLE3_DOCTOR_FORWARD", "transformers")
    assert load_target(str(FIX / "target"), dtype="float32", device="cpu").forward == "transformers"


def test_the_tokenizer_is_the_class_autotokenizer_picks(target):
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(FIX / "target"))
    assert type(target.tokenizer) is type(auto)
    msgs = [{"role": "user", "content": "Write a haiku about <|end|> tokens."}]
    a = target.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert a == auto.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert target.tokenizer(a, add_special_tokens=False)["input_ids"] == auto(a, add_special_tokens=False)["input_ids"]


def test_a_command_on_a_native_target_never_imports_transformers_modeling_stack():
    code = (
        "import sys\n"
        "from eagle3_doctor.cli.app import run\n"
        "sys.argv = ['eagle3-doctor', 'acceptance', '--target', 'fixtures/target', '--draft', 'fixtures/draft-sglang',"
        " '--prompts', 'fixtures/prompts.jsonl', '--max-new-tokens', '8', '--limit', '2']\n"
        "try:\n    run()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('transformers.modeling_utils', 'torch._dynamo', 'sympy') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "HEAVY []" in out.stdout, out.stdout[-500:] + out.stderr[-1500:]


def test_a_right_padded_replay_without_its_mask_gives_each_rows_own_features(tmp_path, monkeypatch):
    """On the GPU a right-padded batch runs with no padding mask (the masked kernel cost 4.2x at 4 x 32k): every real
    row's taps are what that row alone gives, within float32's rounding, and the replay zeroes the pads' rows. Run
    here by taking the GPU's route on the CPU."""
    import eagle3_doctor.model.native.decoder as decoder
    from eagle3_doctor.model.replay import iter_captures

    nat, _ = _both(_saved(tmp_path, "llama-gqa-bias"))
    seqs = _seqs(nat.tokenizer, 6)
    pts = all_points(nat.num_layers)
    alone = {i: capture(nat, make_batch([s], 0, torch.device("cpu")), pts)[0] for i, s in enumerate(seqs)}
    dropped = []
    real = decoder._mask
    monkeypatch.setattr(decoder, "_drops_right_padding", lambda am: True)
    monkeypatch.setattr(decoder, "_mask", lambda am, *a: dropped.append(real(am, *a)[0] is None) or real(am, *a))
    for rb in iter_captures(nat, seqs, pts, batch_size=6):
        for r, i in enumerate(rb.index):
            n = len(seqs[i])
            for p in pts:
                torch.testing.assert_close(rb.captured[p][r, :n], alone[i][p][0], rtol=1e-5, atol=1e-5)
                assert not rb.captured[p][r, n:].any()
    assert dropped == [True] and len({len(s) for s in seqs}) > 1
