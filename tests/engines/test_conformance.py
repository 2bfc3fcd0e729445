"""The committed conformance table (conformance/table.json, written by `make conformance` from the
engines' own released code) and what it says: the seed case on each DeepSeek release, the start-up
refusals, the key each runner reads, every family the harness derives, the draft table. No download here."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

TABLE = json.loads((ROOT / "conformance" / "table.json").read_text())
sys.path.insert(0, str(ROOT / "conformance"))
from releases import RELEASES  # noqa: E402

ROWS = {r["id"]: r for r in TABLE["rows"]}


def outcome_of(row: dict) -> dict[str, str]:
    """A row's executed cases; an outcome that is one string for every case is stored once as {"*": it}."""
    got = TABLE["outcomes"][row["outcome"]]
    if set(got) == {"*"}:
        grid = TABLE["grid"]["modelopt"] if row["engine"] == "modelopt" else TABLE["grid"]
        return dict.fromkeys(grid["cases"], got["*"])
    return got


def outcome(engine: str, version: str, family: str, runner: str = "default") -> dict[str, str]:
    return outcome_of(ROWS[TABLE["release_rows"][engine][version][f"{family}/{runner}"]])


def test_every_listed_release_maps_to_an_executed_row():
    for engine in ("sglang", "vllm"):
        assert TABLE["releases"][engine] == RELEASES[engine], "releases.py changed: run `make conformance`"
        for v in RELEASES[engine]:
            fams = TABLE["release_rows"][engine][v]
            assert fams, (engine, v)
            for rid in fams.values():
                row = ROWS[rid]
                assert v in row["releases"] and row["executed_from"] in row["releases"]
                # a row is executed from its first release, and the releases it covers follow it
                assert RELEASES[engine].index(row["executed_from"]) <= RELEASES[engine].index(v)
    assert sum(len(r["releases"]) for r in TABLE["rows"]) == sum(
        len(v) for e in ("sglang", "vllm", "modelopt") for v in TABLE["release_rows"][e].values()
    )
    assert TABLE["releases"]["modelopt"] == RELEASES["nvidia-modelopt"]


def test_seed_case_on_each_deepseek_release_kind():
    # sglang deepseek_v2.py: no setter in 0.5.2 (start-up failure); plain +1 in 0.5.5 and 0.5.10;
    # +1 only when ids[0] == 1 from 0.5.15; AuxHiddenStatePacker count check in 0.5.23.
    assert outcome("sglang", "0.5.2", "deepseek")["61|nested|2,30,58"].startswith("!start-up: AttributeError")
    for v in ("0.5.5", "0.5.10"):
        assert outcome("sglang", v, "deepseek")["61|nested|2,30,58"] == "layer_out[2],layer_out[30],layer_out[58]"
    for v in ("0.5.15", "0.5.23"):
        assert outcome("sglang", v, "deepseek")["61|nested|2,30,58"] == "layer_out[1],layer_out[29],layer_out[57]"
    assert "captured 2 of 3 aux hidden states" in outcome("sglang", "0.5.23", "deepseek")["61|nested|-1,2,30"]


@pytest.mark.parametrize("family", ["mistral", "deepseek", "gpt_oss"])
def test_vllm_0_10_2_refuses_non_llama_qwen_targets(family):
    # vllm config/__init__.py: eagle3_target_supported = ["llama", "qwen"]
    assert "Eagle3 is only supported for ['llama', 'qwen']" in outcome("vllm", "0.10.2", family, "v1")["32|none|-"]
    # Qwen3-MoE passes that check and fails at load: no SupportsEagle3 (vllm v1/worker/gpu_model_runner.py)
    assert "does not support EAGLE3" in outcome("vllm", "0.10.2", "qwen3_moe", "v1")["32|none|-"]


def test_vllm_0_33_v2_runner_reads_only_the_top_level_key():
    v1, v2 = outcome("vllm", "0.33.0", "llama", "v1"), outcome("vllm", "0.33.0", "llama", "v2")
    assert v1["32|nested|3,16,30"] == "layer_out[2],layer_out[15],layer_out[29]"
    assert v2["32|nested|3,16,30"] == v2["32|none|-"] == "layer_out[1],layer_out[15],layer_out[28]"


# --------------------------------------------------------------------------- engines.py vs the table

import functools  # noqa: E402

import sglang_exec  # noqa: E402
import vllm_exec  # noqa: E402

from eagle3_doctor.core.errors import BadInput  # noqa: E402
from eagle3_doctor.engines.families import FAMILIES, arch_family, enumerated_table  # noqa: E402
from eagle3_doctor.engines.keys import IDS, NESTED  # noqa: E402
from eagle3_doctor.engines.serving import resolve_serving  # noqa: E402

ENUMERATED = enumerated_table()


@functools.cache
def hf_configs(engine: str, family: str) -> tuple[dict, ...]:
    """The config.json heads a user's checkpoint of this harness family has: the class the harness
    executed, under every model_type transformers maps to that class (kimi_k25, remote code only,
    under the type vLLM's check sees)."""
    from transformers.models.auto import modeling_auto

    named = sglang_exec.FAMILIES if engine == "sglang" else vllm_exec.FAMILIES
    # an enumerated family (data/engine_families.json) is the architecture the releases register
    cls = named[family][1] if family in named else ENUMERATED["families"][family]["architectures"][0]
    types = {
        mt
        for name in dir(modeling_auto)
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")
        for mt, c in getattr(modeling_auto, name).items()
        if cls in (c if isinstance(c, (list, tuple)) else [c])
    } or {vllm_exec.FAMILIES[family][2] if family in vllm_exec.FAMILIES else family}
    return tuple({"model_type": mt, "architectures": [cls]} for mt in sorted(types))


@functools.cache
def cli_family(engine: str, family: str) -> str:
    """The family the CLI derives from such a config (engines.arch_family), the same for every head."""
    got = {arch_family(c) for c in hf_configs(engine, family)}
    assert len(got) == 1, (engine, family, got)
    return got.pop()


def test_the_cli_derives_every_harness_family():
    # the harness's qwen3 is the doctor's qwen; every other family keeps its name
    for engine, fams in (("sglang", sglang_exec.FAMILIES), ("vllm", vllm_exec.FAMILIES)):
        for fam in fams:
            assert cli_family(engine, fam) == {"qwen3": "qwen"}.get(fam, fam), (engine, fam)
    # and every family enumerated from the releases' registries, under each model_type transformers gives it
    assert "qwen2" in ENUMERATED["families"]
    for fam in ENUMERATED["families"]:
        for engine in ("sglang", "vllm"):
            assert cli_family(engine, fam) == fam, (engine, fam)


def test_the_enumeration_is_the_table_s():
    # the families the package serves are the ones the executed table holds rows for, release by release
    for engine in ("sglang", "vllm"):
        for v in RELEASES[engine]:
            fams = {k.split("/")[0] for k in TABLE["release_rows"][engine][v]}
            assert set(ENUMERATED["families"]) <= fams, (engine, v)
            # every architecture a release serves is a family the doctor derives from a config naming it, or is listed
            # as not modelled with why
            for arch in TABLE["served"][engine][v]:
                fam = arch_family({"architectures": [arch]})
                assert arch in ENUMERATED["not_modelled"] or fam in FAMILIES, (engine, v, arch)


def _determined(engine: str, version: str, family: str) -> list[str]:
    """The capture (or the engine's own failure) the doctor predicts at L = 32 for every id layout; never the
    "not modelled" answer."""
    out = []
    for ids in (None, [1, 15, 28], [2, 16, 29]):
        cfg = {} if ids is None else {IDS: ids, NESTED: ids}
        s = resolve_serving(engine, version, family, 32, cfg)
        assert s.failure is None or s.failure.when != "undetermined", (engine, version, family, s.failure.message)
        out.append(",".join(map(str, s.spec)) if s.failure is None else f"!{s.failure.when}")
    return out


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_qwen2_target_is_determined_by_every_modelled_release(engine):
    fam = arch_family({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]})
    assert fam == "qwen2"
    runners = {v: sorted({k.split("/")[1] for k in TABLE["release_rows"]["vllm"][v]}) for v in RELEASES["vllm"]}
    versions = [f"{v}-{r}" for v in RELEASES["vllm"] for r in runners[v]] if engine == "vllm" else RELEASES["sglang"]
    got = {v: _determined(engine, v, fam) for v in versions}
    # and the newest release serves it: three states captured, as its own executed row says
    newest = versions[-1]
    assert all(not x.startswith("!") and x.count("layer_out") == 3 for x in got[newest]), got[newest]


# Deliberate differences (docs/engine-sources.md, "Where the doctor deliberately differs"):
# ids outside engines.id_range are refused as bad input instead of being run.
EXPLAINED = "refused: outside the doctor's id range"


def _case(key: str):
    L, layout, ids = key.split("|")
    return int(L), layout, None if ids == "-" else [int(x) for x in ids.split(",") if x]


def _config(layout: str, ids) -> tuple[dict, bool]:
    if layout == "none":
        return {}, True
    other = [1, 2, 3] if ids != [1, 2, 3] else [4, 5, 6]
    return {
        "nested": ({NESTED: ids}, True),
        "top": ({IDS: ids}, True),
        "both": ({IDS: ids, NESTED: other}, True),
        "nested_aux_off": ({NESTED: ids}, False),
    }[layout]


def predict(engine: str, version: str, family: str, runner: str, key: str) -> str:
    L, layout, ids = _case(key)
    cfg, use_aux = _config(layout, ids)
    v = f"{version}-{runner}" if engine == "vllm" else version
    try:
        # ModelOpt's hooks are executed on stub layers of no family: its rows are family "all"
        fam = family if engine == "modelopt" else cli_family(engine, family)
        s = resolve_serving(engine, v, fam, L, cfg, use_aux_hidden_state=use_aux)
    except BadInput:
        return EXPLAINED
    if s.failure:
        return f"!{s.failure.when}"
    return ",".join(str(p) for p in s.spec)


def _norm(actual: str) -> str:
    if "mlp_branch[" in actual:
        # sglang gemma3_causal.py from 0.5.17 feeds the MLP branch: no capture point names it, the doctor
        # reports it as an engine failure at serving time (ENG003)
        return "!serving"
    if actual.startswith("!not modelled"):
        return "!undetermined"  # the harness did not execute it: the doctor says undetermined (ENG004)
    return actual.split(":", 1)[0] if actual.startswith("!") else actual


def disagreements(rows=None, every_release_L: int = 61) -> tuple[list[str], int, int]:
    bad, explained, n = [], 0, 0
    for row in rows or TABLE["rows"]:
        table = outcome_of(row)
        for rel in row["releases"]:
            for key, actual in table.items():
                if rel != row["executed_from"] and not key.startswith(f"{every_release_L}|"):
                    continue
                n += 1
                got = predict(row["engine"], rel, row["family"], row["runner"], key)
                if got == EXPLAINED:
                    explained += 1
                elif got != _norm(actual):
                    bad.append(f"{row['engine']} {rel} {row['family']}/{row['runner']} {key}: engine {actual!r}, doctor {got!r}")
    return bad, explained, n


def test_engines_py_agrees_with_the_executed_table():
    bad, explained, n = disagreements()
    assert not bad, f"{len(bad)} of {n} cases disagree ({explained} explained); first: " + "\n".join(bad[:15])


# --------------------------------------------------------------------------- the draft model, executed

import draft_exec  # noqa: E402

TESTDATA = ROOT / "conformance" / "testdata"


@pytest.mark.parametrize(("engine", "version"), [("sglang", "0.5.23"), ("sglang", "0.5.6.post1"), ("vllm", "0.18.0")])
def test_the_draft_table_is_what_the_harness_reads_from_the_release(engine, version):
    """conformance/draft_exec.py run now, on the release's own llama_eagle3.py as shipped (testdata/),
    gives exactly the row the package serves from data/draft_serving.json."""
    from eagle3_doctor.engines.draft_table import behaviour, table

    got = draft_exec.execute_release(engine, TESTDATA / engine / version)
    assert got["rope"].pop("transformers") == table()["transformers"][engine][version]  # read off its METADATA
    assert got == behaviour(engine, version)[0]


def test_the_draft_harness_reads_what_each_release_applies():
    """Spot facts of the executed rows, each one a different mechanism of the harness."""
    sg = draft_exec.execute_release("sglang", TESTDATA / "sglang" / "0.5.23")
    assert sg["flags"]["norm_before_fc"]["keys"] == ["eagle_config.norm_before_fc", "norm_before_fc"]  # precedence probe
    assert "use_aux_norm" in sg["keys_read"]  # the recording config: fc_norm's legacy alias
    assert sg["layers"]["later"]["norm_before_attention"] == "hidden_norm"  # the symbolic forward
    assert sg["flags"]["norm_before_residual"] == {"applied": True, "keys": [], "default": False}
    v = draft_exec.execute_release("vllm", TESTDATA / "vllm" / "0.18.0")
    assert v["flags"]["norm_before_fc"]["keys"] == ["norm_before_fc"] and v["flags"]["fc_norm"]["applied"] is None
    assert v["layers"]["later"]["norm_before_attention"] == "input_layernorm"
    assert v["speculators"]["norm_before_residual"] == {"passed": True, "default": True}
    assert v["speculators"]["norm_before_fc"]["passed"] is False
    # fc's input width: SGLang 0.5.23 counts num_aux_hidden_states, then eagle_config's ids; vLLM 0.18.0 builds 3
    assert sg["aux"] == {"default": 3, "keys": ["num_aux_hidden_states", "eagle_config.eagle_aux_hidden_state_layer_ids"]}
    assert v["aux"] == {"default": 3, "keys": []}
    # base.py's builder puts a speculators checkpoint's speculative_tokens into num_speculative_tokens
    assert v["speculators"]["aux_passed"] == ["eagle_aux_hidden_state_layer_ids"]
    assert v["speculators"]["steps"] == "num_speculative_tokens"


def test_the_rope_harness_reads_what_each_release_builds():
    """Spot facts of the RoPE probe (conformance/rope_exec.py), each a different step of the chain it executes."""
    import rope_exec

    def built(engine, version, presentation, kind):
        return rope_exec.probe_rope(engine, TESTDATA / engine / version)["built"][presentation][kind]

    # llama.py reading rope_parameters first (SGLang 0.5.23): the config's theta under every presentation
    assert built("sglang", "0.5.23", "tf4_rope_parameters", "llama3")["numbers"]["base"] == rope_exec.THETA
    # llama.py reading config.rope_theta (SGLang 0.5.6.post1): transformers 5 sets none, so get_rope gets 10000
    got = built("sglang", "0.5.6.post1", "tf5", "llama3")
    assert got["class"] == "Llama3RotaryEmbedding" and got["numbers"]["base"] == 10000
    # get_rope's dispatch on rope_scaling: transformers 4 leaves a rope_parameters-only config unscaled
    assert built("sglang", "0.5.6.post1", "tf4_rope_parameters", "yarn")["class"] == "RotaryEmbedding"
    # vLLM's own RoPE patch of get_config (0.18.0) copies transformers 4's default theta over rope_parameters'
    got = built("vllm", "0.18.0", "tf4_rope_parameters", "linear")
    assert got["class"] == "LinearScalingRotaryEmbedding" and got["numbers"]["base"] == 10000.0
    assert rope_exec.probe_rope("vllm", TESTDATA / "vllm" / "0.18.0")["transformers"] == "<5,>=4.56.0"


def test_every_listed_release_has_a_draft_row():
    from eagle3_doctor.engines.draft_table import table

    t = table()
    for engine in ("sglang", "vllm"):
        assert sorted(t["release_rows"][engine]) == sorted(RELEASES[engine])


def test_the_docs_show_the_executed_draft_table():
    from eagle3_doctor.engines.draft_table import markdown

    doc = (ROOT / "docs" / "draft-forward.md").read_text()
    inner = doc.split("<!-- draft-table:begin -->\n", 1)[1].split("<!-- draft-table:end -->", 1)[0]
    assert inner == markdown(), "regenerate the table in docs/draft-forward.md from engines/draft_table.markdown()"
