"""The launch's flag values against the release it names: CMD006, a value that release refuses at start-up (argparse
choices: SGLang's literal lists, vLLM's and the config Literals its get_kwargs turns into choices; vLLM's
``SpeculativeConfig.method``, a pydantic-validated ``Literal`` from 0.9.1), and CMD007, a
vLLM method name a release before 0.9.1 compares exactly and acts on none of (it detects a method from the draft).
Each release's names are read from its own wheel (engines/flag_releases.py)."""

from __future__ import annotations

from typing import Any

from .flag_releases import SOURCE as FLAG_SOURCE
from .flag_releases import RefusedValue
from .launch_config import VLLM_METHOD, ServeConfig

_READ = {
    "sglang": "literal lists only",
    "vllm": "literal lists, and the Literal of the config field get_kwargs makes the flag from (choices, not a metavar)",
}


def value_finding(sc: ServeConfig, r: RefusedValue) -> Any:
    """CMD006 or CMD007 for one value of the launch the release ``r.release`` does not take as given."""
    if r.flag == VLLM_METHOD:
        return _vllm_method(sc, r)
    return _argparse_choice(sc, r)


def _takes(engine: str, r: RefusedValue, by: str) -> str:
    if r.takes_it:
        return f"{engine} releases whose {by} takes {r.value!r}: {', '.join(r.takes_it)}"
    return f"no tracked {engine} release takes {r.value!r}"


def _argparse_choice(sc: ServeConfig, r: RefusedValue) -> Any:
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    eng = sc.engine
    if r.spelled is not None:
        fix = f"{r.flag} {r.spelled} (the parser matches its names exactly, case and all)"
    elif r.takes_it:
        fix = f"{r.flag} one of {', '.join(r.choices)}, or run a {eng} release that takes {r.value!r} ({r.takes_it[-1]})"
    else:
        fix = f"{r.flag} one of {', '.join(r.choices)}"
    return Finding(
        "CMD006",
        f"{r.flag} {r.value} is not a value {eng} {r.release} takes: that server refuses to start (argparse: invalid choice)",
        [f"{eng} {r.release}'s parser lists {r.flag}'s values: {', '.join(r.choices)} ({r.source})", _takes(eng, r, "parser"),
         f"each release's choices read from its own wheel ({FLAG_SOURCE}): {_READ[eng]}"],
        Fix(fix, file=SERVER_COMMAND, key=r.flag, op="set", value=r.spelled),
        data=_data(r),
    )  # fmt: skip


def _detected(sc: ServeConfig, r: RefusedValue) -> str:
    """What the release does with a name it acts on none of, for this launch (engines/vllm_method.py, executed)."""
    m = sc.method_settled
    if m is None:
        return f"a name it matches none of falls through to its detection from the draft ({r.release}'s method not settled here)"
    got = f"runs this draft under {m.method}" if m.method else f"raises {m.raises}"
    return (
        f"a name it matches none of falls through to its detection from the draft: for this launch it {got} ({m.why}; {m.source})"
    )


def _vllm_method(sc: ServeConfig, r: RefusedValue) -> Any:
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    name = f'--speculative-config method "{r.value}"'
    if r.spelled is not None:
        fix = f'set "method": "{r.spelled}" in --speculative-config (vLLM matches its method names exactly, case and all)'
    else:
        later = f", or run a vLLM release that takes it ({r.takes_it[-1]})" if r.takes_it else ""
        fix = f'set "method" in --speculative-config to a name vLLM {r.release} takes (listed in the evidence){later}'
    edit = Fix(fix, file=SERVER_COMMAND, key=VLLM_METHOD, op="set", value=r.spelled)
    names = ", ".join(r.choices)
    if r.refused:
        return Finding(
            "CMD006",
            f"{name} is not a method vLLM {r.release} takes: that server refuses to start (pydantic validates "
            "SpeculativeConfig.method against its Literal)",
            [f"vLLM {r.release}'s SpeculativeConfig.method admits: {names} ({r.source})", _takes("vllm", r, "SpeculativeConfig"),
             f"each release's names read from its own wheel ({FLAG_SOURCE}): the field's Literal, its aliases followed"],
            edit,
            data=_data(r),
        )  # fmt: skip
    return Finding(
        "CMD007",
        f"{name} is not a method vLLM {r.release} acts on: it detects one from the draft instead",
        [f"vLLM {r.release}'s SpeculativeConfig is a plain dataclass (no validation); the names it handles, matched "
         f"exactly (the field's annotation, and every name its code compares self.method with): {names} ({r.source})",
         _detected(sc, r), _takes("vllm", r, "SpeculativeConfig")],
        edit,
        data=_data(r),
    )  # fmt: skip


def _data(r: RefusedValue) -> dict[str, Any]:
    return {"flag": r.flag, "value": r.value, "release": r.release, "choices": r.choices, "source": r.source,
            "takes_it": r.takes_it}  # fmt: skip
