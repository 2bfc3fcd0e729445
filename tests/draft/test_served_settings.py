"""The served settings beside the forward flags, per release, each executed from the release's own draft model
(conformance/draft_exec.py): how many aux hidden states the release's draft takes (FWD012)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, TARGET
from safetensors.torch import load_file, save_file

from eagle3_doctor.analyses.inspect.inspection import inspect


def fwd012(d, engine, version):
    return [f for f in inspect(str(TARGET), str(d), engine=engine, engine_version=version).findings if f.code == "FWD012"]


def _four_aux(tmp_copy, fmt: str, name: str, ids_at: str | None):
    """The fixture draft with fc widened to four aux states (the fourth slot's columns zero), its four ids stated
    nested (``eagle_config``), at the top level, or nowhere."""
    d = tmp_copy(DRAFTS[fmt], name)
    sd = load_file(d / "model.safetensors")
    fc = sd["fc.weight"]
    th = fc.shape[1] // 3
    sd["fc.weight"] = torch.cat([fc, torch.zeros(fc.shape[0], th, dtype=fc.dtype)], dim=1)
    save_file(sd, d / "model.safetensors")
    c = json.loads((d / "config.json").read_text())
    ids = [1, 3, 5, 6]
    c.get("eagle_config", {}).pop("eagle_aux_hidden_state_layer_ids", None)
    c.pop("eagle_aux_hidden_state_layer_ids", None)
    if ids_at == "nested":
        c.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = ids
    elif ids_at == "top":
        c["eagle_aux_hidden_state_layer_ids"] = ids
    (d / "config.json").write_text(json.dumps(c))
    return d, th


@pytest.mark.parametrize(
    ("engine", "version", "fix"),
    [
        ("sglang", "0.5.11", "upgrade to SGLang >= 0.5.12"),
        ("vllm", "0.18.0", "upgrade to vLLM >= 0.22.0"),
    ],
)
def test_a_release_hard_wired_to_three_aux_states_says_so(tmp_copy, engine, version, fix):
    d, th = _four_aux(tmp_copy, "sglang", f"aux4-{engine}-{version}", "nested")
    (f,) = fwd012(d, engine, version)
    assert f.severity == "error" and f.fix.startswith(fix), f.fix
    assert (f.data["trained"], f.data["served"], f.data["key"]) == (4, 3, None)
    ev = " ".join(f.evidence)
    assert f"[{th}, {4 * th}]" in ev and f"[{th}, {3 * th}]" in ev and "executed (conformance/draft_exec.py)" in ev
    assert "no key read" in ev


@pytest.mark.parametrize(
    ("engine", "version"), [("sglang", "0.5.12"), ("sglang", "0.5.23"), ("vllm", "0.22.0"), ("vllm", "0.33.0")]
)
def test_a_release_that_counts_the_draft_s_ids_is_quiet(tmp_copy, engine, version):
    d, _ = _four_aux(tmp_copy, "sglang", f"aux4-ok-{engine}-{version}", "nested")
    assert not fwd012(d, engine, version)
    # and the plain three-state fixture is quiet on a release hard-wired to three
    assert not fwd012(DRAFTS["sglang"], engine, "0.5.11" if engine == "sglang" else "0.18.0")


def test_the_count_without_ids_takes_the_default_and_the_fix_is_the_explicit_key(tmp_copy):
    d, _ = _four_aux(tmp_copy, "sglang", "aux4-noids", None)
    (f,) = fwd012(d, "sglang", "0.5.23")
    assert "none of them in this config" in " ".join(f.evidence)
    assert (f.edit.key, f.edit.value, f.edit.op) == ("num_aux_hidden_states", 4, "set")
    c = json.loads((d / "config.json").read_text())
    c["num_aux_hidden_states"] = 4
    (d / "config.json").write_text(json.dumps(c))
    assert not fwd012(d, "sglang", "0.5.23")


def test_vllm_drops_a_speculators_draft_s_top_level_ids_for_the_count(tmp_copy):
    """update_eagle3 passes the top-level ids on at the top level, and the draft model counts only
    num_aux_hidden_states and eagle_config's ids (both executed): a four-state speculators draft is built for three."""
    d, _ = _four_aux(tmp_copy, "speculators", "aux4-spec", "top")
    (f,) = fwd012(d, "vllm", "0.33.0")
    assert (f.data["served"], f.edit.key, f.edit.value) == (3, "transformer_layer_config.num_aux_hidden_states", 4)
    c = json.loads((d / "config.json").read_text())
    c["transformer_layer_config"]["num_aux_hidden_states"] = 4
    (d / "config.json").write_text(json.dumps(c))
    assert not fwd012(d, "vllm", "0.33.0")


def test_the_aux_count_finding_on_the_command_line(tmp_copy, tmp_path):
    """As typed: inspect --engine sglang --engine-version 0.5.11 prints FWD012 with its fix, and exits 1."""
    from conftest import invoke

    d, _ = _four_aux(tmp_copy, "sglang", "aux4-cli", "nested")
    out = tmp_path / "i.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "sglang", "--engine-version", "0.5.11", "--json", out)
    assert r.exit_code == 1, r.output
    assert "FWD012" in r.output and "SGLang >= 0.5.12" in r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD012"]
    assert (f["data"]["trained"], f["data"]["served"]) == (4, 3)


# --------------------------------------------------------------------------- steps past the trained depth (FWD013)


def _spec_info(depth):
    from types import SimpleNamespace

    methods = [{"proposal_type": "greedy", "speculative_tokens": depth}] if depth is not None else []
    return SimpleNamespace(config={"speculators_config": {"proposal_methods": methods}})


def test_steps_past_the_recorded_depth_give_the_rates_within_and_past_it():
    from eagle3_doctor.draft.served_settings import depth_finding

    # five prompts, four passes each: accepted draft tokens per pass
    accepted = [[5, 3, 1, 0], [4, 4, 2, 1], [5, 2, 3, 0], [3, 5, 1, 2], [4, 3, 0, 5]]
    f = depth_finding(_spec_info(3), accepted, 5, "vllm", "0.33.0", "num_speculative_tokens")
    assert f.code == "FWD013" and f.severity == "info"
    assert (f.data["trained_depth"], f.data["served_steps"]) == (3, 5)
    # passes reaching position 4: accepted >= 4 -> 7 of 20; position 5: accepted == 5 -> 4 of 20
    assert f.data["past_depth_rates"] == [0.35, 0.2]
    ev = " ".join(f.evidence)
    assert "past it 4: 0.350" in ev and "build_vllm_speculative_config" in ev
    assert f.fix.startswith("leave num_speculative_tokens out of --speculative-config (vllm 0.33.0 then drafts 3)")
    # no more steps than trained, or no recorded depth: nothing to say
    assert depth_finding(_spec_info(3), accepted, 3, "vllm", "0.33.0", "num_speculative_tokens") is None
    assert depth_finding(_spec_info(None), accepted, 5, "vllm", "0.33.0", "num_speculative_tokens") is None
    # vLLM 0.10.1 puts speculative_tokens under num_lookahead_tokens (executed): the fix is the step count itself
    g = depth_finding(_spec_info(3), accepted, 5, "vllm", "0.10.1", "num_speculative_tokens")
    assert g.fix.startswith("draft 3 steps a pass (num_speculative_tokens 3)")


def test_the_depth_finding_on_the_command_line(tmp_path):
    """The speculators fixture (trained with a 3-step unroll, speculative_tokens 3) drafted 6 steps a pass."""
    from conftest import PROMPTS, invoke

    out = tmp_path / "a.json"
    r = invoke("acceptance", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--engine-version", "0.33.0",
               "--prompts", PROMPTS, "--limit", 8, "--max-new-tokens", 32, "-k", 6, "--json", out)  # fmt: skip
    assert r.exit_code == 0, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD013"]
    assert (f["data"]["trained_depth"], f["data"]["served_steps"]) == (3, 6)
    past = f["data"]["past_depth_rates"]
    assert len(past) == 3 and past == sorted(past, reverse=True) and 0 < past[-1] < past[0] < 1
