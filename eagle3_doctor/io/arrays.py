"""Stored tensors as numpy arrays, so that reading a checkpoint (inspect, validate) needs no torch.

numpy has no bfloat16 or float8: those keep their raw bits (uint16, uint8) beside the dtype the file
names, and are decoded exactly to float32 on demand. A torch consumer views the same bits as its own
dtype (``StoredArray.to_torch``), so one reader serves both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where an array is made: the CLI's preflight imports this module to reject bad input at once
    import numpy as np

# safetensors dtype code -> (torch's name for it, the numpy dtype its bytes are read as)
SAFETENSORS_DTYPES: dict[str, tuple[str, str]] = {
    "BOOL": ("bool", "bool"),
    "U8": ("uint8", "<u1"),
    "I8": ("int8", "<i1"),
    "I16": ("int16", "<i2"),
    "U16": ("uint16", "<u2"),
    "I32": ("int32", "<i4"),
    "U32": ("uint32", "<u4"),
    "I64": ("int64", "<i8"),
    "U64": ("uint64", "<u8"),
    "F16": ("float16", "<f2"),
    "F32": ("float32", "<f4"),
    "F64": ("float64", "<f8"),
    "C64": ("complex64", "<c8"),
    "BF16": ("bfloat16", "<u2"),
    "F8_E4M3": ("float8_e4m3fn", "<u1"),
    "F8_E5M2": ("float8_e5m2", "<u1"),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", "<u1"),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", "<u1"),
}

_FLOATS = {"float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
_BITS = {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}  # raw bits, decoded on demand


class StoredArray:
    """One stored tensor: its array (raw bits for the dtypes numpy lacks) and the dtype the file names."""

    __slots__ = ("raw", "dtype", "_values")

    def __init__(self, raw: np.ndarray, dtype: str):
        self.raw = raw
        self.dtype = dtype  # torch's spelling: "bfloat16", "float32", "int64", "bool", ...
        self._values: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.raw.shape)

    @property
    def ndim(self) -> int:
        return self.raw.ndim

    @property
    def size(self) -> int:
        return int(self.raw.size)

    @property
    def is_floating_point(self) -> bool:
        return self.dtype in _FLOATS

    def values(self) -> np.ndarray:
        """The numbers: floats numpy lacks decoded to float32 (exactly), every other dtype as stored.

        Decoded once and kept: inspect reads a tensor's numbers for several checks, and on an 8B
        checkpoint each decode of a 128k-row embedding is a 2 GB allocation."""
        import numpy as np

        if self._values is not None:
            return self._values
        if self.dtype == "bfloat16":
            # bf16 is the top half of a float32: shifting its bits back is exact (in place: one allocation)
            wide = self.raw.astype(np.uint32)
            np.left_shift(wide, 16, out=wide)
            self._values = wide.view(np.float32)
        elif self.dtype in _BITS:
            self._values = _float8_table(self.dtype)[self.raw]
        else:
            self._values = self.raw
        return self._values

    def float32(self) -> np.ndarray:
        v = self.values()
        return v if v.dtype.name == "float32" else v.astype("float32")

    def to_torch(self) -> Any:
        """The same bits as a torch tensor of the stored dtype (torch imported here, by its callers' need)."""
        import numpy as np
        import torch

        raw = self.raw if self.raw.flags.writeable else self.raw.copy()
        t = torch.from_numpy(np.ascontiguousarray(raw))
        return t.view(getattr(torch, self.dtype)) if self.dtype in _BITS else t


def rounded_to(values: np.ndarray, dtype: str | None) -> np.ndarray:
    """float32 ``values`` as a tensor cast to ``dtype`` holds them (round to nearest even), back in float32:
    the torch draft casts every weight to its fc's dtype, and inspect must see the same numbers."""
    import numpy as np

    values = values.astype(np.float32, copy=False)
    if dtype == "float16":
        with np.errstate(over="ignore"):  # past float16's range is inf, as torch's cast gives
            return values.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        u = values.view(np.uint32).astype(np.uint64)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
        return np.where(np.isnan(values), values, r)
    return values


def from_torch(t: Any) -> StoredArray:
    """A torch tensor (a pickled checkpoint's) as a StoredArray, its bits unchanged."""
    import numpy as np
    import torch

    name = str(t.dtype).replace("torch.", "")
    t = t.detach().cpu().contiguous()
    if name in _BITS:
        bits = torch.int16 if t.element_size() == 2 else torch.uint8
        raw = t.view(bits).numpy()
        return StoredArray(raw.view(np.uint16) if bits == torch.int16 else raw, name)
    return StoredArray(t.numpy(), name)


_F8_TABLES: dict[str, np.ndarray] = {}


def _float8_table(dtype: str) -> np.ndarray:
    """float32 value of each of the 256 bit patterns of a float8 dtype (OCP FP8 and the FNUZ variants)."""
    import numpy as np

    if dtype not in _F8_TABLES:
        exp_bits, bias = (4, 7) if "e4m3" in dtype else (5, 15)
        fnuz = dtype.endswith("fnuz")
        bias += fnuz  # the FNUZ formats shift the exponent bias by one
        man_bits = 7 - exp_bits
        b = np.arange(256, dtype=np.int64)
        sign = np.where(b & 0x80, -1.0, 1.0)
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        normal = (1 + m / (1 << man_bits)) * np.exp2(e.astype(np.float64) - bias)
        sub = (m / (1 << man_bits)) * np.exp2(1.0 - bias)
        v = sign * np.where(e == 0, sub, normal)
        top = e == (1 << exp_bits) - 1
        if fnuz:
            v[0x80] = np.nan  # negative zero's pattern is the only NaN
        elif exp_bits == 4:
            v[top & (m == 7)] = np.nan  # e4m3fn: no infinities, S.1111.111 is NaN
        else:
            v[top & (m == 0)] = sign[top & (m == 0)] * np.inf
            v[top & (m != 0)] = np.nan
        _F8_TABLES[dtype] = v.astype(np.float32)
    return _F8_TABLES[dtype]
