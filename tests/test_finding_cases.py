"""Planted faults, one table: each row copies a fixture, plants one fault in the copy, runs the command
as a user types it (``conftest.invoke``, with ``--json``) and expects its finding code with its fix.

Where the finding carries a config edit (the JSON ``edit``: op "set" or "delete" on draft/config.json),
the edit is applied to the copy by its key -- never by parsing the sentence -- and the same command is
run again: the code is gone. Where the printed fix is itself a config sentence (``set "k": v in the
draft's config.json`` / ``delete "k" from ...``), pasting it as written gives the same config as the
edit. A row whose finding has no config edit names a part of the printed fix instead; ``check`` holds
what a row pins beyond that (data, evidence, the forensics, the terminal output).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, TARGET, invoke
from conftest import paste_printed_fix as paste_printed
from safetensors.torch import load_file, save_file

DRAFT_CONFIG = "draft/config.json"

# ----------------------------------------------------------------------------- planting a fault


def config(fn: Callable[[dict], object]) -> Callable[[Path], None]:
    """A fault in the copy's config.json: ``fn`` edits the parsed config in place."""

    def plant(d: Path) -> None:
        c = json.loads((d / "config.json").read_text())
        fn(c)
        (d / "config.json").write_text(json.dumps(c, indent=2))

    return plant


def weights(fn: Callable[[dict], object]) -> Callable[[Path], None]:
    """A fault in the copy's model.safetensors: ``fn`` edits the state dict in place."""

    def plant(d: Path) -> None:
        sd = load_file(d / "model.safetensors")
        fn(sd)
        save_file(sd, d / "model.safetensors", metadata={"format": "pt"})

    return plant


def both(*plants: Callable[[Path], None]) -> Callable[[Path], None]:
    def plant(d: Path) -> None:
        for p in plants:
            p(d)

    return plant


def nothing(d: Path) -> None:
    """No fault in the files: the shipped fixture under an engine that serves it otherwise."""


def nested(key: str, value) -> Callable[[dict], None]:
    """Set a dotted key in a config (``transformer_layer_config.head_dim``)."""

    def fn(c: dict) -> None:
        *parents, last = key.split(".")
        node = c
        for p in parents:
            node = node[p]
        node[last] = value

    return fn


def sglang_ids(ids) -> Callable[[dict], None]:
    return lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=ids)


def speculators_ids(ids) -> Callable[[dict], None]:
    return lambda c: c.update(eagle_aux_hidden_state_layer_ids=ids)


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Case:
    id: str
    fixture: str  # what is copied: a draft format ("sglang", "speculators", "eagle") or "target"
    plant: Callable[[Path], None]  # the fault, planted in the copy
    args: tuple[str, ...]  # typed after `inspect --target T --draft D`
    code: str  # the finding expected, exactly once
    edit: str | None = None  # the config edit's op the finding carries ("set"/"delete"); None: no config edit
    fix: str | None = None  # a part of the printed fix
    alone: bool = False  # the only code at warning or error
    family: str | None = None  # the only finding of its family (e.g. "FWD") before the fix, none of it after
    clean_after: bool = False  # after the edit: exit 0 and no finding at all
    check: Callable[[dict, dict, str, Path], None] | None = None  # (finding, document, terminal output, the copy)
    shipped: str = "sglang"  # the shipped draft run beside a copied target

    def argv(self, target: Path, draft: Path, out: Path) -> list:
        return ["inspect", "--target", target, "--draft", draft, *self.args, "--json", out]


def _evidence(f: dict) -> str:
    return " ".join(f["evidence"])


def _codes(doc: dict) -> list[str]:
    return [f["code"] for f in doc["findings"]]


def _untrained_head(sd: dict) -> None:
    torch.manual_seed(0)
    sd["lm_head.weight"] = torch.randn_like(sd["lm_head.weight"]) * 0.02


def _flip_t2d(sd: dict) -> None:
    t2d = sd["t2d"].clone()
    on, off = t2d.nonzero().flatten()[:3], (~t2d).nonzero().flatten()[:3]
    t2d[on], t2d[off] = False, True
    sd["t2d"] = t2d


def _d2t_out_of_range(sd: dict) -> None:
    sd["d2t"] = sd["d2t"].clone()
    sd["d2t"][-1] = 10**6


def _nan_in_fc(sd: dict) -> None:
    sd["fc.weight"] = sd["fc.weight"].clone()
    sd["fc.weight"][3, 5] = float("nan")


def _qwen3_norms(prefix: str) -> Callable[[dict], None]:
    """q_norm/k_norm weights of a Qwen3 draft layer (not all ones, so they matter)."""

    def fn(sd: dict) -> None:
        g = torch.Generator().manual_seed(0)
        sd[prefix + "q_norm.weight"] = 1 + 0.3 * torch.randn(32, generator=g)
        sd[prefix + "k_norm.weight"] = 1 + 0.3 * torch.randn(32, generator=g)

    return fn


QWEN3_SPECULATORS = both(
    config(lambda c: c["transformer_layer_config"].update(model_type="qwen3")), weights(_qwen3_norms("layers.0.self_attn."))
)
FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
CUT_FC = weights(lambda sd: sd.update({"fc.weight": sd["fc.weight"][:, :256].contiguous()}))


def _unknown_forward_keys(c: dict) -> None:
    c["attn_logit_softcapping"] = 30.0
    c["hidden_act"] = "gelu"
    c["eagle_config"]["use_mtp_layernorm"] = True
    c["transformers_version"] = "4.57.0"  # provenance: known inert, not listed


def _check_dimension(key: str, want: int) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert f["severity"] == "error" and f["edit"]["key"] == key and f["edit"]["value"] == want
        loc = {k: f["location"][k] for k in ("file", "key", "path")}
        assert loc == {"file": DRAFT_CONFIG, "key": key, "path": str(d / "config.json")} and f["location"]["line"] >= 1
        leaf = key.rsplit(".", 1)[-1]
        assert f'"{leaf}": {want}' in f["fix"] and "the weights and config.json come from different checkpoints" not in out

    return check


def _check_readings(f: dict, doc: dict, out: str, d: Path) -> None:
    assert "undetermined between 3 readings" in f["title"] and f["edit"] is None
    readings = f["data"]["readings"]
    assert {"num_attention_heads": 4, "head_dim": 32} in readings and {"num_key_value_heads": 4, "head_dim": 16} in readings
    assert {"num_attention_heads": 16, "num_key_value_heads": 8} in readings
    for r in readings:  # every reading listed is one the shapes allow: 128 q rows, 64 k rows
        nh, nkv, hd = r.get("num_attention_heads", 8), r.get("num_key_value_heads", 2), r.get("head_dim", 8)
        assert (nh * hd, nkv * hd) == (128, 64)


def _check_unknown_keys(f: dict, doc: dict, out: str, d: Path) -> None:
    assert _codes(doc) == ["CFG008"] and f["severity"] == "info"  # the one finding, and info does not fail inspect
    assert sorted(f["data"]["keys"]) == ["attn_logit_softcapping", "eagle_config.use_mtp_layernorm", "hidden_act"]
    assert f["location"]["key"] == f["data"]["keys"][0]
    assert 'hidden_act = "gelu": the canonical draft\'s MLP runs SiLU' in _evidence(f)
    status = {k["key"]: k["status"] for k in doc["forensics"]["keys"]}
    assert status["transformers_version"] == "inert" and status["eagle_config.eagle_aux_hidden_state_layer_ids"] == "modelled"
    assert "info[CFG008]" in out


def _check_nan(f: dict, doc: dict, out: str, d: Path) -> None:
    assert f["evidence"] == ["fc.weight"] and f["location"]["key"] == "fc.weight"
    assert next(t for t in doc["forensics"]["tensors"] if t["name"] == "fc.weight")["finite"] is False


def _check_last_layer_id(f: dict, doc: dict, out: str, d: Path) -> None:
    # the 8-layer fixture target: SGLang's +1 rule makes id 7 index 8, which the Llama loop (0..7) never tests
    assert f["severity"] == "error" and "id 7 captures nothing" in f["title"]
    assert f["data"]["fed"] == 2 and f["data"]["fc_states"] == 3 and f["data"]["uncaptured_ids"] == [7]
    ev = "\n".join(f["evidence"])
    assert "mat1 and mat2 shapes cannot be multiplied (Tx256 and 384x128)" in ev
    assert "srt/models/llama_eagle3.py" in ev and "srt/models/llama.py" in ev
    assert "id 7: index 8" in ev
    # no SGLang list reaches layer_out[7] of a Llama target: the fix names the engines whose inverse rule does
    assert "vllm 0.33.0 with ids [2, 4, 8]" in f["fix"] and "trtllm 1.2 with ids [1, 3, 7]" in f["fix"]
    assert f["location"]["key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"


def _check_empty_ids(f: dict, doc: dict, out: str, d: Path) -> None:
    assert f["data"]["fed"] == 0 and "empty" in f["title"]
    assert "too many values to unpack" in f["evidence"][0]
    assert f["edit"]["key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"


def _no_code(*codes: str) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert not set(codes) & set(_codes(doc)), _codes(doc)

    return check


def _all(*checks: Callable[[dict, dict, str, Path], None]) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        for c in checks:
            c(f, doc, out, d)

    return check


def _data(**want) -> Callable[[dict, dict, str, Path], None]:
    """These entries of the finding's data (``_data_is``: the data is exactly these)."""

    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert {k: f["data"].get(k) for k in want} == want, f["data"]

    return check


def _data_is(**want) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert f["data"] == want, f["data"]

    return check


def _evidence_has(*parts: str, index: int | None = None, line: bool = False) -> Callable[[dict, dict, str, Path], None]:
    """Parts of the evidence: of all its lines, of line ``index``, or (``line``) each one a whole line."""

    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        ev = f["evidence"] if line else f["evidence"][index] if index is not None else _evidence(f)
        for p in parts:
            assert p in ev, (p, f["evidence"])

    return check


def _fix_is(text: str) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert f["fix"] == text, f["fix"]

    return check


def _title_has(*parts: str) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        for p in parts:
            assert p in f["title"], (p, f["title"])

    return check


S, V, M, E = ("--engine", "sglang"), ("--engine", "vllm"), ("--engine", "modelopt"), ("--engine", "eagle")


def vllm(version: str) -> tuple[str, ...]:
    return ("--engine", "vllm", "--engine-version", version)


def sglang(version: str) -> tuple[str, ...]:
    return ("--engine", "sglang", "--engine-version", version)


ROPE_THETA = config(lambda c: c.update(rope_theta=500000.0))
MAX_POSITIONS = config(lambda c: c.update(max_position_embeddings=64))
LLAMA_ARCHITECTURE = config(lambda c: c.update(architectures=["LlamaForCausalLM"]))
BOTH_HEADS_AND_HEAD_DIM = config(lambda c: c.update(num_attention_heads=8, head_dim=8))
NO_LM_HEAD = weights(lambda sd: sd.pop("lm_head.weight"))
NO_D2T = weights(lambda sd: (sd.pop("d2t"), sd.pop("t2d")))
UP_IS_GATE = weights(lambda sd: sd.update({"midlayer.mlp.up_proj.weight": sd["midlayer.mlp.gate_proj.weight"].clone()}))
FC_FOR_ANOTHER_TARGET = both(CUT_FC, config(lambda c: c.update(target_hidden_size=128)))
# trained with input_norm (its weight is in the checkpoint), the flag nested where vLLM's speculators path never looks
NORM_BEFORE_FC_NESTED = both(
    config(lambda c: (c.pop("norm_before_fc"), c.update(eagle_config={"norm_before_fc": True}))),
    weights(lambda sd: sd.update({"input_norm.weight": 1.5 * torch.ones(384)})),
)
BOTH_FC_NORMS = both(
    config(lambda c: c.update(norm_before_fc=True, fc_norm=True)),
    weights(
        lambda sd: sd.update({"input_norm.weight": torch.ones(384), **{f"fc_norm.{i}.weight": torch.ones(128) for i in range(3)}})
    ),
)
NESTED_LAYOUT_KEY = config(lambda c: c["transformer_layer_config"].update(rope_is_neox_style=False))
DRAFT_FP8_CONFIG = config(lambda c: c.__setitem__("quantization_config", FP8_BLOCK))
DRAFT_SCALE_TENSOR = weights(lambda sd: sd.__setitem__("midlayer.mlp.down_proj.weight_scale", torch.ones(1)))
DIMENSIONS = [  # a config dimension the weights contradict: (format, key, written, what the shapes imply)
    ("sglang", "head_dim", 16, 32),
    ("speculators", "transformer_layer_config.head_dim", 64, 32),
    ("sglang", "intermediate_size", 512, 384),
    ("eagle", "hidden_size", 96, 128),
    ("sglang", "num_key_value_heads", 4, 2),
    ("sglang", "draft_vocab_size", 300, 256),
    ("sglang", "target_hidden_size", 100, 128),
]
ENGINE_OF = {"sglang": S, "speculators": V, "eagle": E}


def _edit_is(key: str, value=None) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert f["edit"]["key"] == key and (value is None or f["edit"]["value"] == value), f["edit"]

    return check


def _count(code: str, n: int) -> Callable[[dict, dict, str, Path], None]:
    def check(f: dict, doc: dict, out: str, d: Path) -> None:
        assert _codes(doc).count(code) == n, _codes(doc)

    return check


# fmt: off
CASES = [
    # --- the draft's config against the target and the engine
    Case("rope-theta", "sglang", ROPE_THETA, S, "CFG003", "set", fix='"rope_theta": 10000.0', alone=True),
    Case("max-positions", "sglang", MAX_POSITIONS, S, "CFG004", "set"),
    Case("architecture-for-sglang", "sglang", LLAMA_ARCHITECTURE, S, "CFG007", "set"),
    # the class named for vLLM keeps the draft's layout: Eagle3Speculator would make an EAGLE-layout
    # draft read as speculators (whose config has no hidden_size at the top level)
    Case("architecture-for-vllm-eagle-layout", "eagle", LLAMA_ARCHITECTURE, V, "CFG007", "set",
         fix='"architectures": ["LlamaForCausalLMEagle3"]'),
    Case("architecture-for-vllm-speculators", "speculators", LLAMA_ARCHITECTURE, V, "CFG007", "set",
         fix='"architectures": ["Eagle3Speculator"]'),
    Case("unsorted-ids-top-level-vllm", "sglang", config(speculators_ids([5, 2, 4])), V, "CFG002", "set"),
    # SGLang captures in layer order (srt/models/llama.py: membership test inside the layer loop, executed in
    # conformance/table.json), as ModelOpt's hooks do: the training spec read through the draft's own convention
    # is in layer order too, so only the unsorted list itself is reported
    Case("unsorted-ids-sglang", "sglang", config(sglang_ids([4, 1, 3])), S, "CFG002", "set", alone=True),
    Case("unsorted-ids-modelopt", "sglang", config(sglang_ids([4, 1, 3])), M, "CFG002", "set", check=_no_code("CAP004")),
    Case("unknown-forward-keys", "sglang", config(_unknown_forward_keys), S, "CFG008",
         fix="check your engine applies it", check=_check_unknown_keys),
    *(Case(f"dimension-{key}", fmt, config(nested(key, bad)), ENGINE_OF[fmt], "DRF012", "set", clean_after=True,
           check=_check_dimension(key, want)) for fmt, key, bad, want in DIMENSIONS),
    # q 8x8=64 and k 2x8=16, the file 128 and 64: no one value to write
    Case("heads-and-head-dim-both-off", "sglang", BOTH_HEADS_AND_HEAD_DIM, S, "DRF012",
         fix="set the reading training used, one of", check=_check_readings),
    # --- the draft's tensors
    Case("missing-lm-head", "sglang", NO_LM_HEAD, S, "DRF001", fix="sgl#27908", alone=True),
    Case("d2t-removed", "sglang", NO_D2T, S, "DRF002", fix="re-export the draft with the d2t tensor", alone=True),
    Case("d2t-out-of-range", "sglang", weights(_d2t_out_of_range), S, "DRF003", fix="re-create d2t from the draft vocabulary",
         alone=True),
    Case("t2d-inconsistent-with-d2t", "sglang", weights(_flip_t2d), S, "DRF004", fix="rebuild t2d from d2t", alone=True),
    Case("fc-for-another-target", "sglang", FC_FOR_ANOTHER_TARGET, S, "DRF005", fix="re-export the trained fc"),
    Case("fc-cut-against-the-fed-states", "sglang", CUT_FC, S, "DRF005", fix="re-export the trained fc",
         check=_all(_title_has("feeds 3 aux state(s)"), _no_code("ENG002"))),
    Case("untrained-head", "sglang", weights(_untrained_head), S, "DRF006", fix="re-export lm_head.weight", alone=True),
    Case("nan-in-a-tensor", "sglang", weights(_nan_in_fc), S, "DRF009", fix="re-export from a healthy training checkpoint",
         check=_check_nan),
    Case("duplicated-tensor", "sglang", UP_IS_GATE, S, "DRF013", fix="one tensor was written under two names",
         check=_evidence_has("midlayer.mlp.gate_proj.weight and midlayer.mlp.up_proj.weight hold identical values", line=True)),
    # --- the layer ids as the engine captures them
    # vLLM's V1 runner reads the nested SGLang ids as vLLM ids: one layer early
    Case("ids-read-in-another-numbering", "sglang", nothing, vllm("0.33.0-v1"), "CAP001", "set"),
    Case("sglang-id-at-the-last-layer", "sglang", config(sglang_ids([1, 3, 7])), sglang("0.5.23"), "ENG002",
         fix="layer_out[1], layer_out[3], layer_out[7]", check=_check_last_layer_id),
    Case("sglang-empty-id-list", "sglang", config(sglang_ids([])), S, "ENG002", "delete",
         fix="layer_out[1], layer_out[3], layer_out[4]", check=_check_empty_ids),  # what the default then feeds
    # vLLM sorts and de-duplicates: [2, 2, 5] feeds two states to a 3-state fc
    Case("repeated-id-vllm", "speculators", config(speculators_ids([2, 2, 5])), V, "ENG002", fix="retrain on ids vllm captures",
         check=_all(_title_has("id 2 repeats a layer"), _data(fed=2), _evidence_has("model_executor/models/llama_eagle3.py"))),
    # srt/models/llama_eagle3.py applies fc only when the width differs from the embeddings': one 128-wide state passes raw
    Case("one-state-of-draft-width-sglang", "sglang", config(sglang_ids([6, 6, 6])), S, "ENG003",
         fix="retrain on ids sglang captures", check=_all(_data(fed=1), _title_has("without its fc"))),
    # --- the draft's forward as the engine runs it
    Case("flag-in-a-key-the-engine-never-reads", "speculators", NORM_BEFORE_FC_NESTED, vllm("0.33.0"), "FWD001", "set",
         family="FWD", check=_all(_data(flag="norm_before_fc", served=False),
                                  _evidence_has("never reads eagle_config.norm_before_fc"),
                                  _fix_is('set "norm_before_fc": true in the draft\'s config.json'))),
    # SpecForge 0.2.0 trained norm_output=true as "norm before lm_head" (its default); SGLang feeds the normed state
    Case("specforge-norm-output-read-as-eagle31-by-sglang", "sglang", config(lambda c: c.update(norm_output=True)), S, "FWD001",
         "delete", family="FWD",
         check=_all(_data_is(flag="norm_output", trained=False, served=True), _evidence_has("SpecForge 0.2.0"))),
    Case("specforge-without-the-head-norm", "sglang", config(lambda c: c.update(norm_output=False)), V, "FWD001", fix="retrain",
         family="FWD", check=_data(flag="norm_before_lm_head")),
    Case("speculators-missing-norm-before-residual", "speculators", config(lambda c: c.pop("norm_before_residual")), V, "FWD001",
         "set", family="FWD", check=_data_is(flag="norm_before_residual", trained=False, served=True)),
    Case("tied-head", "sglang", config(lambda c: c.update(tie_word_embeddings=True)), S, "FWD004", "set", family="FWD"),
    Case("both-fc-norms", "speculators", BOTH_FC_NORMS, V, "FWD005", fix="keep the one training used", family="FWD"),
    Case("sglang-reads-the-layout-key-only-at-the-top-level", "speculators", NESTED_LAYOUT_KEY, S, "FWD006", "set", family="FWD",
         check=_evidence_has("never reads transformer_layer_config.rope_is_neox_style")),
    Case("qwen3-layer-under-old-vllm", "speculators", QWEN3_SPECULATORS, vllm("0.10.2"), "FWD008", fix="--engine-version 0.33.0",
         family="FWD", check=_evidence_has("registers no Qwen3 EAGLE-3 draft", index=1)),
    Case("qwen3-layer-under-sglang", "speculators", QWEN3_SPECULATORS, S, "FWD008", fix="cannot run", family="FWD",
         check=_evidence_has("LlamaForCausalLMEagle3", index=1)),
    # vLLM >= 0.33 runs the norms only where the config says Qwen3: the edit is what its check reads
    Case("qwen3-norms-undeclared-speculators", "speculators", weights(_qwen3_norms("layers.0.self_attn.")), vllm("0.33.0"),
         "FWD008", "set", fix='"transformer_layer_config": {"model_type": "qwen3"}', family="FWD"),
    Case("qwen3-norms-undeclared-sglang-layout", "sglang", weights(_qwen3_norms("midlayer.self_attn.")), vllm("0.33.0"),
         "FWD008", "set", fix='"architectures": ["Eagle3Qwen3ForCausalLM"]', family="FWD"),
    # --- quantization
    # vLLM builds the draft with the draft's own (here: fp8) scheme: QNT004 beside it
    Case("draft-config-quantized-but-weights-16-bit", "sglang", DRAFT_FP8_CONFIG, V, "QNT002", "delete",
         check=_all(_edit_is("quantization_config"), _count("QNT004", 1))),
    Case("quantized-draft-tensors-without-config", "sglang", DRAFT_SCALE_TENSOR, V, "QNT002",
         fix="copy the quantization_config the quantizer wrote",
         check=_evidence_has("midlayer.mlp.down_proj.weight_scale", index=0)),
    Case("sglang-quantized-draft-gets-its-own-method-flag", "sglang", DRAFT_FP8_CONFIG, S, "QNT001",
         fix="--speculative-draft-model-quantization", check=_edit_is("--speculative-draft-model-quantization", "fp8")),
    Case("quantized-target-under-an-engine-nobody-modelled", "target", DRAFT_FP8_CONFIG, E, "QNT005", fix="ea_model.py",
         shipped="eagle"),
]
# fmt: on


# ----------------------------------------------------------------------------- applying a fix


def apply_edit(c: dict, edit: dict) -> None:
    """A config edit by its dotted key: "set" writes the value (a dict merges into the section it names), "delete" drops it."""
    node = c
    if edit["key"] is None:
        node.update(edit["value"])
        return
    *parents, last = edit["key"].split(".")
    for p in parents:
        node = node.setdefault(p, {})
    if edit["op"] == "delete":
        node.pop(last)
    elif isinstance(edit["value"], dict) and isinstance(node.get(last), dict):
        node[last].update(edit["value"])
    else:
        node[last] = edit["value"]


def run(case: Case, target: Path, draft: Path, out: Path) -> tuple[int, dict, str]:
    r = invoke(*case.argv(target, draft, out))
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    # the one exit policy: a finding at warning or above fails the command
    assert r.exit_code == int(any(f["severity"] in ("warning", "error") for f in doc["findings"])), (r.exit_code, doc["findings"])
    return r.exit_code, doc, r.output


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_planted_fault_is_its_finding_and_its_fix_removes_it(case: Case, tmp_copy, tmp_path):
    src = TARGET if case.fixture == "target" else DRAFTS[case.fixture]
    copy_ = tmp_copy(src, f"{case.fixture}-{case.id}")
    case.plant(copy_)
    target, draft = (copy_, DRAFTS[case.shipped]) if case.fixture == "target" else (TARGET, copy_)
    _, doc, out = run(case, target, draft, tmp_path / "before.json")

    hits = [f for f in doc["findings"] if f["code"] == case.code]
    assert len(hits) == 1, _codes(doc)
    (f,) = hits
    if case.alone:
        assert sorted({g["code"] for g in doc["findings"] if g["severity"] in ("warning", "error")}) == [case.code], _codes(doc)
    if case.family:
        assert [g["code"] for g in doc["findings"] if g["code"].startswith(case.family)] == [case.code], _codes(doc)
    if case.fix is not None:
        assert case.fix in f["fix"], f["fix"]
    if case.check:
        case.check(f, doc, out, copy_)

    edit = f["edit"]
    config_edit = edit is not None and edit["op"] in ("set", "delete") and edit["file"] == DRAFT_CONFIG
    if case.edit is None:
        assert not config_edit, edit
        return
    assert config_edit and edit["op"] == case.edit, edit
    assert f["location"] is not None and f["location"]["file"] == DRAFT_CONFIG, f["location"]
    assert case.fixture != "target", "a config edit is made to the draft: copy the draft"
    cfg = json.loads((draft / "config.json").read_text())
    edited = copy.deepcopy(cfg)
    apply_edit(edited, edit)
    pasted = copy.deepcopy(cfg)
    if paste_printed(pasted, f["fix"]):
        assert pasted == edited, "the printed fix and its edit write different configs"
    (draft / "config.json").write_text(json.dumps(edited))

    _, doc, _ = run(case, target, draft, tmp_path / "after.json")
    assert case.code not in _codes(doc), doc["findings"]
    if case.family:
        assert not [c for c in _codes(doc) if c.startswith(case.family)], _codes(doc)
    if case.clean_after:
        assert doc["findings"] == [], doc["findings"]


def test_every_row_checks_its_fix_and_names_a_fault_once():
    """A row without a config edit names a part of its printed fix; ids are unique."""
    assert all(c.edit is not None or c.fix for c in CASES)
    assert len({c.id for c in CASES}) == len(CASES)
