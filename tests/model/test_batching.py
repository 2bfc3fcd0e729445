"""Right padding is invariant: padded and unpadded runs give the same features and accepted lengths."""

from __future__ import annotations

import torch
from conftest import DRAFTS, PROMPTS, TARGET

from eagle3_doctor.core.taps import layer_out
from eagle3_doctor.doctor import acceptance, load_setup
from eagle3_doctor.model.target import capture, make_batch


def test_padded_features_equal_unpadded(target):
    seqs = [[5, 9, 11, 40, 7, 3, 2, 99], [5, 9, 11], [17, 18]]
    pts = [layer_out(1), layer_out(4)]
    got, _ = capture(target, make_batch(seqs, 0, target.device), pts)
    for i, s in enumerate(seqs):
        one, _ = capture(target, make_batch([s], 0, target.device), pts)
        for p in pts:
            torch.testing.assert_close(got[p][i, : len(s)], one[p][0], rtol=1e-5, atol=1e-5)


def test_accepted_lengths_do_not_depend_on_batch_size():
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), dtype="float32", device="cpu")
    a = acceptance(setup, prompts_path=str(PROMPTS), num_steps=4, max_new_tokens=32, limit=6, batch_size=1)
    b = acceptance(setup, prompts_path=str(PROMPTS), num_steps=4, max_new_tokens=32, limit=6, batch_size=6)
    assert a.paths["serving"].accepted_lengths == b.paths["serving"].accepted_lengths


def test_truncation_is_noted():
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), dtype="float32", device="cpu")
    run = acceptance(setup, prompts_path=str(PROMPTS), num_steps=2, continuation="text", max_tokens=8, limit=3)
    note = next(n for n in run.notes if "truncated to --max-tokens 8" in n)
    longest = int(note.split("longest had ")[1].split()[0])
    assert f"--max-tokens {longest} measures them whole" in note  # what was cut and how to keep it
    assert run.settings.tokens == 3 * 8
