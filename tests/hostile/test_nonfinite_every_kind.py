"""An all-NaN tensor in any drafter kind is never "OK": inspect names it (DRF009, exit 1) and every measuring
command refuses in one line naming it, by the same check. A DFlash fc or a P-EAGLE mask_hidden of NaN used to be
measured to the end as a draft with no skill (HLT001), and an MTP head's NaN was named nowhere but inspect."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, FIX, PROMPTS, TARGET, invoke

# each kind's fixture and a tensor its forward reads first
KINDS = {
    "dflash": (FIX / "dflash-draft", "fc.weight"),
    "peagle": (FIX / "peagle-draft", "mask_hidden"),
    "mtp": (FIX / "mtp-speculators", None),  # its first floating tensor, by name
    "eagle3": (DRAFTS["sglang"], "fc.weight"),
}


def _poisoned(tmp_path: Path, kind: str, value: float) -> tuple[Path, str]:
    import torch
    from safetensors.torch import load_file, save_file

    src, name = KINDS[kind]
    d = tmp_path / kind
    shutil.copytree(src, d)
    sd = load_file(d / "model.safetensors")
    name = name or sorted(n for n in sd if sd[n].is_floating_point())[0]
    sd[name] = torch.full_like(sd[name], value)
    save_file(sd, d / "model.safetensors")
    return d, name


@pytest.mark.parametrize("kind", list(KINDS))
def test_inspect_never_says_ok_about_a_nan_tensor(kind, tmp_path):
    d, name = _poisoned(tmp_path, kind, float("nan"))
    js = tmp_path / "i.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "vllm", "--json", js)
    assert r.exit_code == 1, r.output
    found = [f for f in json.loads(js.read_text())["findings"] if f["code"] == "DRF009"]
    assert len(found) == 1 and name in json.dumps(found[0]), found


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_measuring_command_refuses_a_nonfinite_tensor_naming_it(kind, value, tmp_path):
    d, name = _poisoned(tmp_path, kind, value)
    r = invoke("acceptance", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "2",
               "--max-new-tokens", "8", "-q")  # fmt: skip
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("eagle3-doctor: error: "), r.stderr
    assert f"hold NaN or Inf ({name})" in lines[0] and "DRF009" in lines[0], lines[0]


def test_the_library_refuses_as_the_cli_does(tmp_path):
    """doctor.run_command skips the CLI: the same refusal, before the kind's implementation runs."""
    from types import SimpleNamespace

    from eagle3_doctor.core.errors import BadInput
    from eagle3_doctor.doctor import Run, run_command

    d, name = _poisoned(tmp_path, "dflash", float("nan"))
    run = Run(target=str(TARGET), draft=str(d), engine="vllm", release=None, dtype="float32",
              options=SimpleNamespace(prompts=str(PROMPTS), limit=2, max_new_tokens=8))  # fmt: skip
    with pytest.raises(BadInput, match=r"hold NaN or Inf \(fc\.weight\)"):
        run_command("acceptance", run)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn])
def test_the_refusals_finiteness_is_the_full_statistics_own(tmp_path, dtype):
    """The measuring commands refuse on finiteness alone (no spectral statistics): for every stored dtype and every
    non-finite value (NaN, +Inf, -Inf; e4m3 has NaN only), and the largest finite one, that answer is the one the full
    per-tensor statistics give, matrices and vectors alike."""
    from safetensors.torch import save_file

    from eagle3_doctor.analyses.inspect.tensors import is_finite, tensor_stat
    from eagle3_doctor.io.hub import load_weights_dir

    big = torch.finfo(dtype).max
    specials = [float("nan"), big] + ([] if dtype == torch.float8_e4m3fn else [float("inf"), float("-inf")])
    tensors = {}
    for i, x in enumerate(specials):
        for shape, name in (((8, 16), "proj.weight"), ((16,), "norm.weight")):
            t = torch.randn(shape).to(dtype)
            t.view(-1)[5] = x
            tensors[f"l{i}.{name}"] = t.contiguous()
    save_file(tensors, tmp_path / "model.safetensors")
    got = load_weights_dir(tmp_path)
    for k, v in got.items():
        want = bool(torch.isfinite(tensors[k].float()).all())
        assert is_finite(v) == tensor_stat(k, k, v).finite == want, (k, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn])
def test_the_refusal_checks_large_tensors_in_slices_and_misses_no_slice(tmp_path, monkeypatch, dtype):
    """The refusal's check splits tensors into slices on a pool of threads: a NaN in any slice of a tensor (the
    first, a middle one, the ragged last) names that tensor, and only it."""
    from safetensors.torch import save_file

    from eagle3_doctor.analyses.inspect import tensors as tn
    from eagle3_doctor.io.hub import load_weights_dir

    monkeypatch.setattr(tn, "_SLICE", 7)
    for at in (0, 30, 40):  # 41 elements: slices of 7, the last one ragged
        stored = {"a.weight": torch.randn(41).to(dtype), "b.weight": torch.randn(5, 3).to(dtype), "c.ids": torch.arange(4)}
        stored["a.weight"][at] = float("nan")
        save_file(stored, tmp_path / "model.safetensors")
        assert tn.nonfinite_names(load_weights_dir(tmp_path)) == ["a.weight"], (at, dtype)
    stored["a.weight"][40] = 0.5
    save_file(stored, tmp_path / "model.safetensors")
    assert tn.nonfinite_names(load_weights_dir(tmp_path)) == []
