"""The judgment's rules (analyses/judgment.py) on figures whose verdict is known, and the mechanisms behind the
instances that motivated them: a marginal lever on a draft with no skill, NaN tensors in every drafter kind,
an inherited padding row, and inspect saying what it cannot see."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import DRAFTS, FIX, PROMPTS, TARGET, invoke

from eagle3_doctor.analyses import judgment as jd
from eagle3_doctor.core.findings import Finding
from eagle3_doctor.core.stats import Interval
from eagle3_doctor.draft.dflash.model import DFlashDraft
from eagle3_doctor.draft.model import Eagle3Draft


def iv(point: float, lo: float, hi: float, n: int = 16) -> Interval:
    return Interval(point, lo, hi, 0.95, n, 2000, 0)


def test_size_and_interval_decide_together():
    assert jd.decides(iv(0.63, 0.40, 0.86), 0.63)
    assert not jd.decides(iv(0.03, 0.01, 0.05), 2.0)  # clears 0 by a hair: a lead at most, never the verdict
    assert not jd.decides(iv(0.15, 0.05, 0.25), 2.0)  # under a tenth of the 2.0 missing
    assert jd.decides(iv(0.25, 0.05, 0.45), 2.0)
    assert jd.leans(iv(0.3, -0.1, 0.7), 0.3) and not jd.leans(iv(0.05, -0.1, 0.2), 0.3)
    assert jd.share_text(iv(0.5, 0.2, 0.8), 2.0) == "25% of the 2.00 missing, residual +1.50"


def test_a_healthy_verdict_is_withdrawn_beside_a_later_error_or_warning():
    healthy = Finding("HLT002", "the draft has skill", [], "nothing to fix offline", severity="info")
    gate = Finding("ACC003", "tau 3.7 is below --min-tau 100", [], "fix the findings above", severity="warning")
    assert [f.code for f in jd.settle([healthy, gate])] == ["ACC003"]
    assert [f.code for f in jd.settle([healthy])] == ["HLT002"]
    note = Finding("CAP007", "ignored ids, harmless", [], "none", severity="info")
    assert [f.code for f in jd.settle([note, healthy])] == ["CAP007", "HLT002"]
    # "no finding of this run decides it" beside the finding that decides it: withdrawn the same way
    undecided = Finding("HLT003", "undetermined: training accepts 1.16 more", [], "rerun", severity="warning")
    served = Finding("FWD001", "the engine runs norm_before_residual = true", [], "x", severity="error")
    assert [f.code for f in jd.settle([undecided, served])] == ["FWD001"]
    assert [f.code for f in jd.settle([undecided])] == ["HLT003"]


def test_no_skill_is_the_checkpoint_whatever_the_paths_agree_on():
    flat = iv(1.0, 1.0, 1.0)
    (f,) = jd.health(DFlashDraft, flat, {"the trained taps": flat}, [], served_name="the served taps")
    assert f.code == "HLT001" and f.severity == "error" and "mask token" in f.fix
    assert jd.no_skill(iv(float("nan"), float("nan"), float("nan")))  # NaN weights accept nothing
    assert not jd.no_skill(iv(1.25, 1.18, 1.32))  # the interval reaches the useful band: not "no skill"
    # served at the baseline while another path has skill: the serving difference, unless a finding already says so
    (g,) = jd.health(Eagle3Draft, flat, {"the training path": iv(2.5, 2.3, 2.7)}, [], served_name="s")
    assert g.code == "HLT001" and "serving difference" in g.fix
    assert jd.health(Eagle3Draft, flat, {"t": iv(2.5, 2.3, 2.7)}, [Finding("ACC001", "x", [], "y")], served_name="s") == []


def test_healthy_is_positive_and_names_what_was_not_looked_at():
    (f,) = jd.health(Eagle3Draft, iv(2.5, 2.3, 2.7), {}, [], served_name="s", unseen=["a training record"])
    assert f.code == "HLT002" and f.severity == "info" and "not looked at by this command: a training record" in f.evidence
    # a path beside it that accepts practically more, which nothing decides: undetermined, never healthy
    (g,) = jd.health(Eagle3Draft, iv(2.0, 1.6, 2.4, 2), {"t": iv(2.4, 2.0, 2.8, 2)}, [], served_name="s")
    assert g.code == "HLT003" and g.severity == "warning"
    # any warning of the run: the other finding speaks
    assert jd.health(Eagle3Draft, iv(2.5, 2.3, 2.7), {}, [Finding("DGN003", "x", [], "y")], served_name="s") == []


def test_one_lever_branch_for_every_kind():
    served, trained = iv(2.0, 1.9, 2.1), iv(2.6, 2.5, 2.7)
    assert jd.lever_branch(served, iv(0.6, 0.4, 0.8), {"t": trained}, []) == ("pipeline", None)
    assert jd.lever_branch(served, iv(0.6, -0.1, 1.2), {"t": trained}, []) == ("undetermined", None)
    assert jd.lever_branch(served, None, {}, []) == ("runtime", None)
    err = Finding("DRF009", "nan", [], "re-export")
    assert jd.lever_branch(served, None, {}, [err]) == ("checkpoint", err)  # an error is never healthy
    hlt = Finding("HLT001", "no skill", [], "x")
    flat = iv(1.0, 1.0, 1.0)
    assert jd.lever_branch(flat, iv(0.0, 0.0, 0.0), {"t": flat}, [hlt]) == ("checkpoint", hlt)


def _nan_copy(tmp_path, src, names):
    from safetensors.torch import load_file, save_file

    d = tmp_path / src.name
    shutil.copytree(src, d)
    sd = load_file(d / "model.safetensors")
    for k in sd:
        if any(n in k for n in names):
            sd[k] = torch.full_like(sd[k], float("nan"))
    save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
    return d


@pytest.mark.parametrize(
    ("fixture", "names"),
    [("dflash-draft", ["fc."]), ("peagle-draft", ["mask_hidden"]), ("mtp-speculators", ["input_proj"])],
)
def test_a_nan_tensor_is_never_ok_for_any_drafter_kind(tmp_path, fixture, names):
    d = _nan_copy(tmp_path, FIX / fixture, names)
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "vllm", "--json", tmp_path / "i.json")
    codes = [f["code"] for f in json.loads((tmp_path / "i.json").read_text())["findings"]]
    assert r.exit_code == 1 and "DRF009" in codes, r.output


def test_a_padding_row_copied_from_the_target_is_no_finding(tmp_path):
    """The fixture target's embedding row 0 is exactly zero (a padding row): a draft that ships the target's
    embedding inherits it, and only a row zero in the draft alone is DRF013."""
    from safetensors.torch import load_file, save_file

    emb = load_file(TARGET / "model.safetensors")["model.embed_tokens.weight"]
    assert not emb[0].any()
    for name, rows in (("copied", []), ("zeroed", [5])):
        d = tmp_path / name
        shutil.copytree(DRAFTS["sglang"], d)
        sd = load_file(d / "model.safetensors")
        sd["embed_tokens.weight"] = emb.clone()
        sd["embed_tokens.weight"][rows] = 0
        save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
        r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "sglang", "--json", tmp_path / f"{name}.json")
        codes = [f["code"] for f in json.loads((tmp_path / f"{name}.json").read_text())["findings"]]
        assert ("DRF013" in codes) == bool(rows), (name, codes, r.output)


def test_inspect_says_what_it_cannot_see_and_compare_hidden_sees_the_seed_incident(tmp_path):
    """The seed incident written into the config: inspect reads files only and says so; compare-hidden and
    acceptance consult the weights' own fit and name the ids the weights were trained on."""
    d = tmp_path / "seed"
    shutil.copytree(DRAFTS["sglang"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg))
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "sglang")
    assert r.exit_code == 0 and "not looked at (inspect runs no forward pass)" in r.output, r.output
    for command in ("compare-hidden", "acceptance"):
        more = ["--max-new-tokens", "24"] if command == "acceptance" else []
        r = invoke(command, "-t", TARGET, "-d", d, "--engine", "sglang", "--prompts", PROMPTS, "--limit", "6", *more,
                   "-q", "--json", tmp_path / f"{command}.json")  # fmt: skip
        found = {f["code"]: f for f in json.loads((tmp_path / f"{command}.json").read_text())["findings"]}
        assert r.exit_code == 1 and found["ACC004"]["severity"] == "error", (command, r.output)
        assert '"eagle_aux_hidden_state_layer_ids": [1, 3, 4]' in found["ACC004"]["fix"]


def test_a_measured_serving_cost_is_judged_by_size_and_interval():
    """DFL004 and PEA004 take their severity from one rule, ACC001's: an error only where setting the served way back
    decides (practical size, interval clear of 0), a warning where it leans, a lead (info) where it is real but
    small, nothing where it is neither; never an error because an interval cleared 0."""
    from eagle3_doctor.analyses.judgment import cost_severity
    from eagle3_doctor.core.stats import Interval

    def severity(point: float, lo: float, hi: float) -> str | None:  # of served - trained
        judged = cost_severity(Interval(point, lo, hi, 0.95, 16, 2000, 0))
        return judged[0] if judged is not None else None

    assert severity(-0.4, -0.5, -0.3) == "error"
    assert severity(-0.4, -0.8, 0.05) == "warning"
    assert severity(-0.05, -0.08, -0.02) == "info"
    assert severity(-0.05, -0.12, 0.01) is None
    assert severity(0.2, 0.1, 0.3) is None  # the served way accepts more


def test_a_position_no_pass_reached_is_dead_only_on_enough_passes():
    """HLT004 decides a dead tail only where the passes bound it under 1% (an interval over prompts bounds a count of
    zero at [0, 0] on any run); on fewer passes the same tail is HLT005, undetermined, naming the passes that decide."""
    from eagle3_doctor.analyses.judgment import depth_finding, passes_to_bound, wilson_upper

    assert passes_to_bound(0.0) == 381 and wilson_upper(0, 381) < 0.01 <= wilson_upper(0, 380)
    assert passes_to_bound(0.02) is None  # a rate of 2% is never bounded under 1%

    def run(passes_per_prompt: int) -> list[list[int]]:  # K 4: positions 3 and 4 never reached
        return [[1, 2, 0, 1] * (passes_per_prompt // 4) for _ in range(5)]

    small, large = depth_finding(run(40), 4, "K"), depth_finding(run(100), 4, "K")  # 200 and 500 passes
    assert small is not None and small.code == "HLT005" and "381" in small.evidence[-1]
    assert large is not None and large.code == "HLT004" and large.data["useful"] == 2
