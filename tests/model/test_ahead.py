"""The work a GPU run starts before torch's import (model.ahead): which device it readies, what it calls, and that it
stays out of the way where it has nothing to do (no driver, torch imported already, turned off, run twice)."""

from __future__ import annotations

import sys
import types

import pytest

from eagle3_doctor.model import ahead


@pytest.mark.parametrize(
    ("device", "index"),
    [
        (None, 0),
        ("auto", 0),
        ("cuda", 0),
        ("cuda:0", 0),
        ("cuda:3", 3),
        ("CUDA:1", 1),
        ("cpu", None),
        ("mps", None),
        ("cuda:x", None),
    ],
)
def test_the_device_a_device_option_runs_on(device, index):
    assert ahead.device_index(device) == index


class _Driver:
    """libcuda's three calls, recorded; ``fail`` names the one that returns an error."""

    def __init__(self, fail: str = ""):
        self.calls: list[tuple[str, object]] = []
        self.fail = fail

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args[-1] if name == "cuDeviceGet" else None))
            return 1 if name == self.fail else 0

        return call


@pytest.fixture
def driver(monkeypatch):
    lib = _Driver()
    monkeypatch.setattr(ahead.ctypes, "CDLL", lambda name: lib if name == "libcuda.so.1" else None)
    return lib


@pytest.fixture
def triton_key(monkeypatch):
    """A stand-in ``triton.runtime.cache`` whose key counts its calls."""
    calls = []
    mod = types.ModuleType("triton.runtime.cache")
    mod.triton_key = lambda: calls.append(1) or "key"
    for name in ("triton", "triton.runtime"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "triton.runtime.cache", mod)
    return calls


def test_the_context_of_the_device_named_and_the_triton_key(driver, triton_key):
    ahead._ahead(2, kernels=True)
    assert [c for c, _ in driver.calls] == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"]
    assert driver.calls[1][1] == 2  # the ordinal asked for
    assert triton_key == [1]


def test_no_triton_for_a_float32_run_and_no_context_where_the_driver_refuses(monkeypatch, triton_key):
    lib = _Driver(fail="cuInit")
    monkeypatch.setattr(ahead.ctypes, "CDLL", lambda name: lib)
    assert ahead._context(0) is False
    assert [c for c, _ in lib.calls] == ["cuInit"]  # nothing asked of a driver that did not start
    ahead._ahead(0, kernels=False)
    assert triton_key == []


def test_no_driver_library_is_no_error(monkeypatch):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ahead.ctypes, "CDLL", missing)
    assert ahead._context(0) is False


@pytest.fixture
def fresh(monkeypatch, driver, triton_key):
    """A process where torch is not imported yet and an NVIDIA driver is loaded; no thread started so far."""
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(ahead, "_STARTED", [])
    monkeypatch.setattr(ahead.os.path, "exists", lambda p: p == "/proc/driver/nvidia/version")
    monkeypatch.delenv(ahead.ENV, raising=False)
    return driver


def test_started_once_a_process_and_waited_for(fresh, triton_key):
    ahead.start("auto", kernels=True)
    ahead.start("cuda:1", kernels=True)
    ahead.wait()
    assert len(ahead._STARTED) == 1
    assert [a for c, a in fresh.calls if c == "cuDeviceGet"] == [0]
    assert triton_key == [1]


@pytest.mark.parametrize("why", ["cpu", "torch imported", "turned off", "no driver"])
def test_not_started_where_it_has_nothing_to_do(fresh, monkeypatch, why):
    device = "cpu" if why == "cpu" else "auto"
    if why == "torch imported":
        monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    if why == "turned off":
        monkeypatch.setenv(ahead.ENV, "0")
    if why == "no driver":
        monkeypatch.setattr(ahead.os.path, "exists", lambda p: False)
    ahead.start(device, kernels=True)
    assert ahead._STARTED == [] and fresh.calls == []


def test_the_commands_that_load_a_target_start_it_with_their_device_and_dtype(monkeypatch):
    """On the user's path: the dispatch asks for the thread with the run's own --device and --dtype, before the
    command's work; inspect, which loads no target, does not."""
    from conftest import DRAFTS, FIX, TARGET, invoke

    asked: list[tuple[str | None, bool]] = []
    monkeypatch.setattr(ahead, "start", lambda device, kernels: asked.append((device, kernels)))
    common = ("--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", FIX / "prompts.jsonl", "--limit", "1")
    r = invoke("acceptance", *common, "--max-new-tokens", "2", "--device", "cpu", "--dtype", "float32")
    assert r.exit_code in (0, 1), r.output
    assert asked == [("cpu", False)]
    r = invoke("inspect", "--draft", DRAFTS["sglang"], "--target", TARGET)
    assert asked == [("cpu", False)]
