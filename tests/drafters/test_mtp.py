"""The MTP fixture measured: the chain estimator equals the plain sequential loop on both recycling modes and
both target states, the planted mismatch is MTP001, and its fix applied to a copy makes the run quiet and
reproduces the trained path (compared within the same run, never against fixed figures)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
from conftest import TARGET

from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
from eagle3_doctor.analyses.acceptance.run import measure_acceptance
from eagle3_doctor.core.taps import final_norm, layer_out
from eagle3_doctor.drafters.mtp.checks import inspect_mtp
from eagle3_doctor.drafters.mtp.fix import write_folded
from eagle3_doctor.drafters.mtp.measure import mtp_acceptance
from eagle3_doctor.drafters.mtp.setup import assemble_mtp

MTP = Path(__file__).resolve().parents[2] / "fixtures" / "mtp-speculators"
PROMPTS = str(Path(__file__).resolve().parents[2] / "fixtures" / "prompts.jsonl")


def opts(**kw):
    base = dict(num_steps=3, max_new_tokens=48, batch_size=4, limit=4, reference=True)
    return AcceptanceOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def mtp_setup(target):
    return assemble_mtp(target, str(MTP), "vllm", None)


def test_the_planted_mismatch_is_mtp001_with_its_rule():
    checks = inspect_mtp(str(TARGET), str(MTP), "vllm")
    assert [f.code for f in checks.findings] == ["MTP003", "MTP001"]
    f = checks.findings[1]
    assert f.data["trained"] == "layer_out[7]" and f.data["served"] == "final_norm"
    assert "gpu_model_runner.py" in " ".join(f.evidence) and f.edit is not None and f.edit.key == "hnorm.weight"


@pytest.mark.parametrize("recycle", ["post_norm", "pre_norm"])
def test_estimator_equals_the_sequential_loop(mtp_setup, recycle):
    """Serving (final_norm) and training (layer_out[L-1]) paths; the loop re-extends the head over fresh target
    states each pass and chains its own recycled state, as the engine does."""
    setup, _ = mtp_setup
    s = copy.copy(setup)
    s.draft = copy.deepcopy(setup.draft)
    s.draft.config.recycle = recycle
    for spec in ((final_norm(),), (layer_out(7),)):
        s.serving = copy.copy(setup.serving)
        s.serving.spec = spec
        run = measure_acceptance(s, opts(), prompts_path=PROMPTS)
        assert run.reference is not None and run.reference.same_tokens
        assert run.reference.agrees_with_estimator, (recycle, spec)
        assert run.paths["serving"].chain.mean_acceptance_length > 1.0  # a trained head: the check is not vacuous


def test_fix_on_a_copy_is_quiet_and_reproduces_the_trained_path(mtp_setup, tmp_path):
    setup, checks = mtp_setup
    before = hashlib.sha256((MTP / "model.safetensors").read_bytes()).hexdigest()
    out = tmp_path / "fixed"
    write_folded(setup, checks, str(out))
    assert hashlib.sha256((MTP / "model.safetensors").read_bytes()).hexdigest() == before  # the input untouched
    # the copy is fed what it was trained on; vLLM still refuses the speculators layout (MTP003 stays)
    assert [f.code for f in inspect_mtp(str(TARGET), str(out), "vllm").findings] == ["MTP003"]
    s2, c2 = assemble_mtp(setup.target, str(out), "vllm", None)
    assert [f.code for f in c2.findings] == ["MTP003"] and s2.train_spec == s2.serving.spec == (final_norm(),)
    o = opts(reference=False, limit=8)
    run = mtp_acceptance(setup, copy.deepcopy(checks), o, PROMPTS, lambda *a: None)
    orig = run.paths
    fixed = measure_acceptance(s2, o, prompts_path=PROMPTS).paths
    # the fold is exact up to a per-token scalar: the copy fed final_norm predicts as the original fed layer_out[L-1]
    assert abs(fixed["serving"].acc_k[0] - orig["training"].acc_k[0]) <= 0.01
    # and the measurement wins over the rule: on this fixture (a nearly uniform final-norm weight, which hnorm
    # absorbs) the served state is not measurably worse, so MTP001 is a warning here, saying why
    mtp001 = next(f for f in run.findings if f.code == "MTP001")
    diff = mtp001.data["recovered"]
    assert (mtp001.severity == "warning") == (diff["lo"] <= 0)


def test_the_fold_takes_back_step_1_and_rescales_the_recycled_state(mtp_setup):
    """On a final norm whose weight spreads, the folded copy predicts step 1 as the head does on its trained
    state, and steps 2.. differently from it: hnorm also reads the recycled state (why fix measures its copy)."""
    import torch

    from eagle3_doctor.draft.mtp.fold import folded_copy
    from eagle3_doctor.model.target import capture, make_batch

    setup, _ = mtp_setup
    head, tgt = setup.draft, setup.target
    g = tgt.parts.norm.weight.detach()
    spread = g * torch.exp(0.5 * torch.randn(g.shape, generator=torch.Generator().manual_seed(0)))
    tokens = [list(range(5, 69))]
    got, _ = capture(tgt, make_batch(tokens, 0, tgt.device), {layer_out(7)})
    x = got[layer_out(7)]
    served = spread * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    ids = torch.roll(torch.tensor(tokens), -1, dims=1)
    with torch.no_grad():
        trained = [head.logits(h) for h in head.unroll(x, ids, 3)]
        unfolded = [head.logits(h) for h in head.unroll(served, ids, 3)]
        folded = [c.logits(h) for c in [folded_copy(head, spread)] for h in c.unroll(served, ids, 3)]
    fold = [float((f - t).norm() / t.norm()) for f, t in zip(folded, trained)]
    none = [float((f - t).norm() / t.norm()) for f, t in zip(unfolded, trained)]
    assert fold[0] < none[0] / 2 and fold[2] > none[2], (fold, none)  # step 1 taken back, step 3 worse than no fold


@pytest.mark.parametrize(("engine", "steps", "topk", "ndt"), [("sglang", 3, 2, 5), ("vllm", 2, 2, None)])
def test_the_tree_estimators_equal_their_sequential_loops_on_the_head(mtp_setup, engine, steps, topk, ndt):
    """SGLang's scored tree and vLLM's full static tree, exact for the MTP head as for EAGLE-3 (the tree search
    runs the head's one step against its own keys)."""
    setup, _ = mtp_setup
    s = copy.copy(setup)
    s.serving = copy.copy(setup.serving)
    s.serving.engine = engine
    run = measure_acceptance(s, opts(num_steps=steps, topk=topk, num_draft_tokens=ndt), prompts_path=PROMPTS)
    assert run.reference is not None and run.reference.tree is not None
    assert run.reference.tree.agrees_with_estimator and run.reference.agrees_with_estimator and run.reference.same_tokens
    tree = run.paths["serving"].tree
    assert tree is not None and tree.mean_acceptance_length >= run.paths["serving"].chain.mean_acceptance_length


def test_vllms_recycling_is_the_releases_and_mtp002_names_the_release_to_upgrade_to(target, tmp_path):
    """The head in DeepSeek's layout, trained recycling the post-norm state: vLLM's deepseek_mtp.py recycles the
    un-normed state through 0.23.0 and the normed one from 0.24.0 (executed). The given release's recycling is
    the one checked and measured; MTP002 names that release and the first one that recycles as trained."""
    from safetensors.torch import load_file

    from eagle3_doctor.draft.mtp.formats import read_mtp
    from eagle3_doctor.draft.mtp.writing import write_mtp
    from eagle3_doctor.drafters.mtp.measure import mtp_diagnose

    sd = load_file(TARGET / "model.safetensors")
    head, _ = read_mtp(MTP, target_embed=sd["model.embed_tokens.weight"], target_head=sd["lm_head.weight"])
    ds = tmp_path / "ds"
    write_mtp(head, ds, "deepseek", target_dir=str(TARGET))
    old, new, newest = (inspect_mtp(str(ds), str(ds), "vllm", v) for v in ("0.23.0", "0.24.0", None))
    assert old.recycle == "post_norm" and old.serving.recycle == "pre_norm"
    assert new.serving.recycle == newest.serving.recycle == "post_norm"
    assert "MTP002" not in {f.code for f in new.findings} | {f.code for f in newest.findings}
    (f,) = [f for f in old.findings if f.code == "MTP002"]
    assert f.title.startswith("vllm 0.23.0 recycles the pre-norm state") and f.data["upgrade"] == "0.24.0"
    assert f.fix is not None and f.fix.startswith("upgrade to vllm 0.24.0")
    # diagnose measures the serving state again with the release's own recycling, on a copy of the head
    setup, checks = assemble_mtp(target, str(ds), "vllm", "0.23.0")
    d = mtp_diagnose(setup, checks, opts(reference=False), PROMPTS, lambda *a: None)
    (f,) = [f for f in d.findings if f.code == "MTP002"]
    assert any(e.startswith("measured on the serving state") for e in f.evidence), f.evidence
    assert setup.draft.config.recycle == "post_norm"  # the loaded head is left as trained
