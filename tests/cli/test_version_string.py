"""One version string, derived from the git tag at build time: --version, the bug report and the JSON's tool field."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

from conftest import invoke

import eagle3_doctor


def test_one_version_everywhere(tmp_path):
    v = version("eagle3-doctor")
    assert eagle3_doctor.__version__ == v
    assert re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[\w.]+)?", v), v
    r = invoke("--version")
    assert r.exit_code == 0 and r.output.strip() == f"eagle3-doctor {v}"
    out = tmp_path / "i.json"
    r = invoke("inspect", "--target", "fixtures/target", "--draft", "fixtures/draft-sglang", "--json", out)
    assert r.exit_code in (0, 1), r.output
    assert json.loads(out.read_text())["tool"]["version"] == v
