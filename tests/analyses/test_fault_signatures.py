"""Runtime-fault signatures: a live profile planted by running each fault through the doctor's own sequential decode
loops (the reference loop of acceptance/reference.py and the engine-like loop of spec_loop.py, perturbed here by
wrappers of this file, never by analyses/faults), written as a vLLM scrape, is attributed to its class; the clean
profile to "as trained"."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET

K = 5
# two replays of the fixture prompts, prompts x new tokens: SHORT for the classes whose cost shows early in a decode,
# LONG for the two that need more verify passes to separate (the margins measured at each size are in the comment
# above DECIDED)
SHORT, LONG = (6, 48), (8, 96)


def _pair(limit: int, new: int):
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions, _no_progress
    from eagle3_doctor.analyses.acceptance.run import acceptance_sequences
    from eagle3_doctor.doctor import load_setup
    from eagle3_doctor.model.replay import load_sources

    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["speculators"]), engine="vllm", dtype="float32", device="cpu")
    opts = AcceptanceOptions(num_steps=K, max_new_tokens=new, limit=limit)
    src = load_sources(setup.target, str(PROMPTS), None, opts.max_tokens, opts.limit, None)
    return setup, acceptance_sequences(setup, src, opts, _no_progress)


@pytest.fixture(scope="module")
def pair():
    return _pair(*SHORT)


@pytest.fixture(scope="module")
def long_pair():
    return _pair(*LONG)


def _candidates(setup, rep, k):
    from eagle3_doctor.analyses.faults.run import candidates

    spec = (setup.serving.spec, setup.draft, setup.serving.label)
    return candidates(setup.target, rep.seqs, rep.starts, spec, None, k, len(rep.seqs))


@pytest.fixture(scope="module")
def cands(pair):
    return _candidates(*pair, K)


@pytest.fixture(scope="module")
def long_cands(long_pair):
    return _candidates(*long_pair, K)


# ----------------------------------------------------------------------------- the plants, independent of the signatures


def vllm_scrape(accepted: list[list[int]], k: int) -> str:
    """The four spec-decode counters as vLLM exposes them (names and meanings: analyses/server_metrics/counters.py)."""
    flat = [a for r in accepted for a in r]
    lab = 'engine="0",model_name="fixtures/target"'
    lines = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} {float(len(flat))}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {float(k * len(flat))}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {float(sum(flat))}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    for p in range(k):
        lines.append(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} {float(sum(a > p for a in flat))}'
        )
    return "\n".join(lines) + "\n"


class _Proxy:
    """The draft, with ``extend`` rewritten by a plant; every other attribute is the draft's."""

    def __init__(self, draft, extend):
        self._draft, self._extend = draft, extend

    def __getattr__(self, name):
        return getattr(self._draft, name)

    def extend(self, h, ids, positions, cache, *, from_aux):
        return self._extend(self._draft, h, ids, positions, cache, from_aux)


_REPLAYED: dict[int, _Replayed] = {}  # by the replay's id: one forward a continuation for the whole module


class _Replayed:
    """The reference loop's target step, answered from one forward of the target over each greedy continuation.

    The loop reads the target's rows and argmax only along the tokens it has verified, which are the continuation's
    (greedy verification), so a step over ``tokens`` returns the rows of their longest common prefix with a
    continuation and nothing past it: a read past that prefix fails instead of seeing the continuation's rows. The
    loop otherwise runs one target forward a pass, which at 16 prompts x 96 tokens was most of this file's minutes.
    """

    def __init__(self, setup, rep):
        from eagle3_doctor.analyses.acceptance.reference import _target_step_fn

        base = _target_step_fn(setup.target, setup.serving.spec)
        self.full = [(torch.tensor(seq), *base(seq)) for seq in rep.seqs]

    def __call__(self, tokens):
        got = torch.tensor(tokens)
        best = max(self.full, key=lambda f: _common(f[0], got))
        n = _common(best[0], got)
        return best[1][:, :n], best[2][:n]


def _common(a: torch.Tensor, b: torch.Tensor) -> int:
    m = min(len(a), len(b))
    diff = (a[:m] != b[:m]).nonzero()
    return int(diff[0]) if len(diff) else m


def _reference(setup, rep, k, step=None, draft_for=None):
    from eagle3_doctor.analyses.acceptance.reference import reference_loop

    base = _REPLAYED.get(id(rep)) or _REPLAYED.setdefault(id(rep), _Replayed(setup, rep))
    out = []
    for i, seq in enumerate(rep.seqs):
        prompt = seq[: rep.starts[i] + 1]
        st = step(base, i) if step is not None else base
        d = draft_for(setup.draft, i) if draft_for is not None else setup.draft
        toks, acc, _ = reference_loop(st, d, prompt, len(seq), k)
        assert toks == seq  # greedy verification: the target's own continuation whatever the draft proposes
        out.append(acc)
    return out


def _patched_attend(monkeypatch, change):
    from eagle3_doctor.draft.model import DraftAttention

    orig = DraftAttention.attend
    monkeypatch.setattr(DraftAttention, "attend", lambda self, q, k, v, mask: orig(self, q, change(k), change(v), mask))


def plant(name, setup, rep, k, monkeypatch):
    """Draft tokens accepted per pass, per prompt, with fault ``name`` planted in the project's own loops."""
    if name == "as trained":
        return _reference(setup, rep, k)
    if name == "kv-layout-shift":  # the attention reads slot i where slot i - 1 was written
        _patched_attend(monkeypatch, lambda x: torch.cat([x[:, :, :1], x[:, :, :-1]], dim=2))
        return _reference(setup, rep, k)
    if name == "kv-fp8-noise":
        _patched_attend(monkeypatch, lambda x: x.clamp(-448, 448).to(torch.float8_e4m3fn).to(x.dtype))
        return _reference(setup, rep, k)
    if name == "hidden-rows-offset":

        def one_back(base, _i):
            def step(tokens):
                aux, amax = base(tokens)
                return torch.cat([aux[:, :1], aux[:, :-1]], dim=1), amax

            return step

        return _reference(setup, rep, k, step=one_back)
    if name == "hidden-rows-other-sequence":

        def others(base, i):
            other = base(rep.seqs[(i + 1) % len(rep.seqs)])[0]

            def step(tokens):
                _, amax = base(tokens)
                idx = torch.arange(len(tokens)).clamp(max=other.shape[1] - 1)
                return other[:, idx], amax

            return step

        return _reference(setup, rep, k, step=others)
    if name == "step-metadata-stale":

        def stuck(_draft, i):
            seen = {}

            def extend(d, h, ids, positions, cache, from_aux):
                if from_aux:
                    seen["t"] = int(positions[0, -1])
                else:  # every step after the first at step 2's position
                    positions = torch.full_like(positions, seen["t"] + 1)
                return d.extend(h, ids, positions, cache, from_aux=from_aux)

            return _Proxy(_draft, extend)

        return _reference(setup, rep, k, draft_for=stuck)
    if name == "no-prompt-context":

        def late(_draft, i):
            first = rep.starts[i]  # the prompt's last position: the first the draft is given

            def extend(d, h, ids, positions, cache, from_aux):
                if from_aux:
                    keep = positions[0] >= first
                    h, ids, positions = h[:, keep], ids[:, keep], positions[:, keep]
                return d.extend(h, ids, positions, cache, from_aux=from_aux)

            return _Proxy(_draft, extend)

        return _reference(setup, rep, k, draft_for=late)
    if name == "catch-up-last-only":

        def newest_only(_draft, i):
            given: set[int] = set()  # the positions the faulty engine's catch-ups ever wrote to the draft's cache

            def extend(d, h, ids, positions, cache, from_aux):
                if from_aux:  # the reference re-extends over 0..t each pass: keep what the engine would hold
                    pos = positions[0].tolist()
                    given.update(pos if not given else pos[-1:])  # the prefill whole, later the newest alone
                    keep = torch.tensor([p in given for p in pos], device=positions.device)
                    h, ids, positions = h[:, keep], ids[:, keep], positions[:, keep]
                return d.extend(h, ids, positions, cache, from_aux=from_aux)

            return _Proxy(_draft, extend)

        return _reference(setup, rep, k, draft_for=newest_only)
    if name == "stale-draft-state":  # the engine-like loop, its draft cache never cut back
        from eagle3_doctor.analyses.spec_loop import speculative_decode
        from eagle3_doctor.draft.decode import DraftDecoder
        from eagle3_doctor.model.decode import CachedTarget

        class NoRollback(DraftDecoder):
            def crop(self, length):
                pass

        out = []
        for i, seq in enumerate(rep.seqs):
            ct = CachedTarget(setup.target, setup.serving.spec, max_len=len(seq) + 1)
            dd = NoRollback(setup.draft, 1, (k + 1) * len(seq))
            run = speculative_decode(ct, dd, seq[: rep.starts[i] + 1], len(seq), k)
            assert run.tokens == seq
            out.append(run.accepted)
        return out
    raise AssertionError(name)


def _rank_from_scrape(tmp_path: Path, accepted, cands, k):
    from eagle3_doctor.analyses.faults.attribute import rank
    from eagle3_doctor.analyses.server_metrics.measured import load_measured

    f = tmp_path / "after.prom"
    f.write_text(vllm_scrape(accepted, k))
    return rank(cands, load_measured(str(f)), k)


# measured on the fixtures, K = 5: the chi-square of the nearest other prediction against each class's own passes
# (decisive at 3.84; docs/serving-evidence.md has the table). At SHORT (6 x 48) the classes of DECIDED are named;
# stale-draft-state and catch-up-last-only are not (2.1 each, one the other's nearest) and are named at LONG (8 x 96:
# 23.7 and 7.5), where no-prompt-context, whose cost is the decode's first passes, is diluted to 1.8 (16 x 96: 3.1).
# kv-fp8-noise lies within 0.2-0.8 of as trained at every size measured on the fixture draft, whose values round within
# noise: undetermined, with its class one of the two closest; on a draft whose values pass fp8's range it is named
# (test_an_fp8_cache_is_attributed_where_the_values_pass_its_range)
DECIDED = ["as trained", "kv-layout-shift", "step-metadata-stale", "hidden-rows-offset", "hidden-rows-other-sequence",
           "no-prompt-context"]  # fmt: skip
DECIDED_LONG = ["stale-draft-state", "catch-up-last-only"]
CLOSE = ["kv-fp8-noise"]


def _attributed(name, setup, rep, cands, tmp_path, monkeypatch):
    planted = plant(name, setup, rep, K, monkeypatch)
    monkeypatch.undo()
    sim = next(c for c in cands if c.name == name)
    # the signature is the independent loop's, pass for pass
    assert planted == sim.accepted
    r = _rank_from_scrape(tmp_path, planted, cands, K)
    assert r.fits[0].candidate.accepted is sim.accepted or r.fits[0].chi2 == pytest.approx(0.0)
    return r


@pytest.mark.parametrize("name", DECIDED + CLOSE)
def test_planted_profile_is_attributed_to_its_class(name, pair, cands, tmp_path, monkeypatch):
    r = _attributed(name, *pair, cands, tmp_path, monkeypatch)
    if name in DECIDED:
        assert r.verdict == name, r.to_dict()
    else:
        assert r.verdict == "undetermined", r.to_dict()
        assert name in (r.separating["a"], r.separating["b"])
        assert r.separating["passes_needed"] > 0


@pytest.mark.parametrize("name", DECIDED_LONG)
def test_planted_profile_is_attributed_with_more_passes(name, long_pair, long_cands, tmp_path, monkeypatch):
    r = _attributed(name, *long_pair, long_cands, tmp_path, monkeypatch)
    assert r.verdict == name, r.to_dict()


@pytest.fixture(scope="module")
def wide_pair():
    """The fixture pair with every draft attention's values scaled up 1000x and its output projection down as much:
    the same function, but values far past e4m3's 448 (the fixture draft's peak under 8), where a quantized KV cache
    saturates. The fixture draft alone cannot show the class: its values round within noise."""
    from eagle3_doctor.draft.model import DraftAttention

    setup, rep = _pair(*SHORT)
    with torch.no_grad():
        for m in setup.draft.modules():
            if isinstance(m, DraftAttention):
                m.v_proj.weight.mul_(1000.0)
                if m.v_proj.bias is not None:
                    m.v_proj.bias.mul_(1000.0)
                m.o_proj.weight.div_(1000.0)
    return setup, rep, _candidates(setup, rep, K)


@pytest.mark.parametrize("name", ["kv-fp8-noise", "as trained"])
def test_an_fp8_cache_is_attributed_where_the_values_pass_its_range(name, wide_pair, tmp_path, monkeypatch):
    setup, rep, cands = wide_pair
    r = _attributed(name, setup, rep, cands, tmp_path, monkeypatch)
    assert r.verdict == name, r.to_dict()


def test_other_faults_fall_outside_the_clean_fit(pair, cands, tmp_path):
    """The clean profile's finding: as trained, with every decided class rejected by the counts."""
    r = _rank_from_scrape(tmp_path, next(c for c in cands if c.name == "as trained").accepted, cands, K)
    assert r.verdict == "as trained"
    rejected = {f.candidate.name for f in r.fits if not f.fits}
    assert {"kv-layout-shift", "hidden-rows-offset", "hidden-rows-other-sequence"} <= rejected


def test_window_past_the_useful_depth(pair, tmp_path):
    """Drafting 12 a pass, the clean profile's last positions are dead: the window class, not as trained."""
    setup, rep = pair
    k = 12
    planted = _reference(setup, rep, k)
    cands = _candidates(setup, rep, k)
    r = _rank_from_scrape(tmp_path, planted, cands, k)
    assert r.verdict == "window-past-depth", r.to_dict()
    w = next(f for f in r.fits if f.candidate.name == "window-past-depth")
    assert w.useful is not None and w.useful <= k - 2


def test_a_profile_no_class_explains(pair, cands, tmp_path):
    """Every pass cut to its first accepted token (the fixture's planted engine bug) matches no prediction."""
    base = next(c for c in cands if c.name == "as trained").accepted
    r = _rank_from_scrape(tmp_path, [[min(a, 1) for a in row] for row in base], cands, K)
    assert r.verdict == "none"
    assert r.separating is not None and r.separating["position"] >= 1
