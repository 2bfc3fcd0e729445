"""The threaded weights reader: the spans cover every tensor's bytes once, and what it reads is what safetensors'
own loader reads, bit for bit, for every dtype and layout (adjacent small tensors, a tensor cut across spans,
tensors converted on the way, several files); a file shortened after its header was read is refused in one line.
The threads run here on the CPU with plain buffers; the GPU's pinned buffers and streams are checked against the
same reference by bench/check_load.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.safeio import tensor_layout
from eagle3_doctor.model.native.read import _copy, read_tensors, spans


def _files(tmp_path: Path) -> list[Path]:
    g = torch.Generator().manual_seed(0)
    a = {
        "w.big": torch.randn(37, 29, generator=g).to(torch.bfloat16),  # cut across spans at the small chunk below
        "w.norm": torch.randn(5, generator=g).to(torch.bfloat16),
        "w.f32": torch.randn(3, 7, generator=g),  # converted on the way: the mapped route
        "ids": torch.arange(11, dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5, dtype=torch.bfloat16),
        "empty": torch.zeros(0, 4, dtype=torch.bfloat16),
        "odd": torch.arange(3, dtype=torch.uint8),  # leaves the tensors after it at odd offsets
        "after_odd": torch.randn(9, generator=g).to(torch.bfloat16),
    }
    b = {"other.file": torch.randn(4, 4, generator=g).to(torch.bfloat16)}
    out = []
    for i, sd in enumerate((a, b)):
        out.append(tmp_path / f"model-{i}.safetensors")
        save_file(sd, str(out[-1]))
    return out


@pytest.mark.parametrize("chunk", [1, 7, 100, 64 << 20])
def test_threaded_read_equals_safetensors_bit_for_bit(tmp_path, chunk):
    files = _files(tmp_path)
    got = read_tensors(files, torch.bfloat16, torch.device("cpu"), threaded=True, chunk=chunk)
    want = {k: v for f in files for k, v in load_file(str(f)).items()}
    assert got.keys() == want.keys()
    for k, w in want.items():
        w = w.to(torch.bfloat16) if w.is_floating_point() else w
        assert got[k].dtype == w.dtype and got[k].shape == w.shape, k
        assert torch.equal(got[k].view(-1).view(torch.uint8), w.reshape(-1).view(torch.uint8)), k


def test_the_spans_cover_each_tensor_once_and_respect_the_chunk(tmp_path):
    f = _files(tmp_path)[0]
    start, layout = tensor_layout(f)
    entries = [(n, s, e) for n, (s, e, _, _) in layout.items()]
    for chunk in (1, 5, 64, 1 << 20):
        covered: dict[str, int] = {}
        for s in spans(f, start, entries, chunk):
            assert 0 < s.end - s.begin <= chunk
            for name, at, off, n in s.pieces:
                assert s.begin + off == start + layout[name][0] + at  # the piece's bytes are the tensor's
                covered[name] = covered.get(name, 0) + n
        assert covered == {n: e - s for n, s, e in entries if e > s}
    # adjacent tensors share one span when the chunk allows: one read for the whole file
    assert len(spans(f, start, entries, 1 << 20)) == 1


def test_a_file_shortened_after_its_header_was_read_is_refused(tmp_path):
    f = _files(tmp_path)[0]
    start, layout = tensor_layout(f)
    work = spans(f, start, [(n, s, e) for n, (s, e, _, _) in layout.items()], 16)
    raw = {n: torch.empty(e - s, dtype=torch.uint8) for n, (s, e, _, _) in layout.items()}
    with open(f, "r+b") as fh:
        fh.truncate(start + 40)
    with pytest.raises(BadInput, match="ended while it was read"):
        _copy(work, raw, torch.device("cpu"))


def test_where_pinned_memory_is_refused_the_mapped_route_reads_everything(tmp_path, monkeypatch):
    """A container whose locked-memory limit refuses the pinned buffers: no thread starts, and every tensor comes
    through the mapped files instead, the same bits."""
    from eagle3_doctor.model.native import read

    def refused(*_: object) -> None:
        raise RuntimeError("CUDA error: out of memory (pinned)")

    monkeypatch.setattr(read, "_buffers", refused)
    files = _files(tmp_path)
    got = read_tensors(files, torch.bfloat16, torch.device("cpu"), threaded=True, chunk=7)
    want = {k: v for f in files for k, v in load_file(str(f)).items()}
    assert got.keys() == want.keys()
    for k, w in want.items():
        w = w.to(torch.bfloat16) if w.is_floating_point() else w
        assert torch.equal(got[k].reshape(-1).view(torch.uint8), w.reshape(-1).view(torch.uint8)), k
