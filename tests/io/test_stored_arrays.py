"""The numpy safetensors reader inspect uses: the same bits as safetensors' torch loader for every dtype
(bf16 and float8 kept as raw bits, decoded exactly), and read_draft's module built from it unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import DRAFTS
from safetensors.torch import load_file, save_file

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.arrays import from_torch, rounded_to
from eagle3_doctor.io.safeio import load_arrays, read_array

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8]
DTYPES += [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


def _sample(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(5, 7, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 100, (5, 7), generator=g).to(dtype)
    x = torch.randn(5, 7, generator=g) * 50
    x[0, :4] = torch.tensor([0.0, -0.0, float("nan"), 1e-6])
    return x.to(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def test_every_dtype_reads_as_safetensors_torch_does(tmp_path):
    tensors = {str(dt).replace("torch.", ""): _sample(dt) for dt in DTYPES}
    tensors["scalar"], tensors["empty"] = torch.tensor(3.5), torch.zeros(0, 4)
    f = tmp_path / "m.safetensors"
    save_file(tensors, str(f))
    ref, got = load_file(str(f)), load_arrays(f)
    assert sorted(got) == sorted(ref)
    for k, t in ref.items():
        a = got[k]
        assert a.dtype == str(t.dtype).replace("torch.", "") and a.shape == tuple(t.shape)
        assert torch.equal(_bits(a.to_torch()), _bits(t)), k  # the very bits
        if t.is_floating_point():
            np.testing.assert_array_equal(a.float32(), t.float().numpy())  # decoded exactly, NaN included
        assert torch.equal(_bits(from_torch(t).to_torch()), _bits(t)), k
    assert read_array(f, "bfloat16").dtype == "bfloat16" and read_array(f, "absent") is None


def test_rounding_to_a_dtype_is_torchs():
    x = torch.randn(4096) * torch.logspace(-8, 8, 4096)
    x[:3] = torch.tensor([float("nan"), float("inf"), 3.3895313892515355e38])
    for dt in (torch.bfloat16, torch.float16):
        want = x.to(dt).float().numpy()
        np.testing.assert_array_equal(rounded_to(x.numpy(), str(dt).replace("torch.", "")), want)


def test_a_tensor_past_its_declared_bytes_is_refused(tmp_path):
    f = tmp_path / "m.safetensors"
    save_file({"w": torch.zeros(4, 4)}, str(f))
    raw = bytearray(f.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = raw[8 : 8 + n].replace(b"[4,4]", b"[4,8]")
    f.write_bytes(raw[:8] + header + raw[8 + n :])
    with pytest.raises(BadInput, match="spans 64 bytes"):
        load_arrays(f)


@pytest.mark.parametrize("fmt", ["sglang", "speculators", "eagle"])
def test_read_draft_holds_the_files_tensors(fmt):
    from eagle3_doctor.draft.formats import canonical_state, read_draft

    d, _ = read_draft(DRAFTS[fmt])
    ref = canonical_state(load_file(str(next(DRAFTS[fmt].glob("*.safetensors")))))
    sd = d.state_dict()
    for k, t in ref.items():
        assert torch.equal(sd[k], t.to(sd[k].dtype)), k
