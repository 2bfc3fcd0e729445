"""A chat template is a program the user hands over: one that loops without end, recurses or floods
the output ends in one line and exit 2, not a hang, a traceback or a bug report."""

from __future__ import annotations

import pytest
from conftest import FIX, TARGET, invoke

REQUESTS = FIX / "conversations" / "requests.jsonl"
TEMPLATES = {
    # 10^10 iterations: a hang without a bound (Jinja's sandbox caps each range() at 100,000 items only)
    "loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "flood": "{% for i in range(100000) %}{% for j in range(10) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
}
EXPECT = {"loop": "did not finish rendering", "recursion": "recurses without end", "flood": "rendered 20,000,000 characters"}


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_a_runaway_template_is_one_line_and_exit_2(kind, tmp_path, monkeypatch):
    from eagle3_doctor.io import templating

    monkeypatch.setattr(templating, "RENDER_SECONDS", 1.0)  # the bound itself is 5 s; the path is the same
    t = tmp_path / f"{kind}.jinja"
    t.write_text(TEMPLATES[kind])
    r = invoke("template-diff", "-t", TARGET, "--serve-template", t, "--requests", REQUESTS)
    assert r.exit_code == 2, r.output[-2000:]
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and EXPECT[kind] in lines[0] and "Traceback" not in r.output, r.output[-2000:]
