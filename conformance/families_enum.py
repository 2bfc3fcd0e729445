"""Every target family a release serves with an EAGLE-3 draft, enumerated from the release's own code.

SGLang: every class a model file registers (`EntryClass`) that defines or inherits
`set_eagle3_layers_to_capture` (sglang_exec.served_targets). vLLM: every architecture of the model
registry whose class implements `SupportsEagle3`, or before that interface has the default-id getter the
runner calls (vllm_exec.served_targets). The union over every release, less the architectures the
harness's named families already execute (sglang_exec.FAMILIES, vllm_exec.FAMILIES), gives one family per
architecture, named by the Hugging Face `model_type` transformers maps that class to (the key a
checkpoint's config.json carries, which the doctor's arch_family reads first). An architecture with no such
model_type cannot be told apart from a user's config and is listed as not modelled, with the reason.

Each family is then executed per release like a named one (run.py), and its engine-table rows are derived
from the executed code (derive_sglang_row, derive_vllm_row) and written to PACKAGE_TABLE, which
eagle3_doctor/engines/families.py and table.py read. A family whose capture code the harness cannot match
gets `unmodelled` rows, never a guessed rule.
"""

from __future__ import annotations

import functools
from pathlib import Path

import sglang_exec
import vllm_exec

PACKAGE_TABLE = "eagle3_doctor/data/engine_families.json"
IDS = "eagle_aux_hidden_state_layer_ids"


@functools.cache
def _hf_types() -> dict[str, frozenset[str]]:
    """class -> the model_type values transformers maps to it (every *_MAPPING_NAMES of the auto classes)."""
    from transformers.models.auto import modeling_auto

    out: dict[str, set[str]] = {}
    for name in dir(modeling_auto):
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES"):
            for mt, c in getattr(modeling_auto, name).items():
                for cls in c if isinstance(c, (list, tuple)) else [c]:
                    out.setdefault(cls, set()).add(mt)
    return {k: frozenset(v) for k, v in out.items()}


def text_model_type(model_type: str) -> str | None:
    """What vLLM's EAGLE-3 target check reads (`hf_text_config.model_type`): the text sub-config's type where
    the config class fixes it, the type itself where it has no text sub-config, None where the checkpoint
    decides (a sub-config typed AutoConfig)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        cfg = CONFIG_MAPPING[model_type]
    except KeyError:
        return None
    sub = (getattr(cfg, "sub_configs", None) or {}).get("text_config")
    if sub is None:
        return model_type
    return getattr(sub, "model_type", None) or None


def _named_records() -> dict:
    """The doctor's named families (eagle3_doctor/engines/families.py NAMED_FAMILIES): the classes and model types
    they already answer for, which an enumerated family must not take."""
    from eagle3_doctor.engines.families import NAMED_FAMILIES

    return NAMED_FAMILIES


def named_architectures() -> set[str]:
    return (
        {c for _, c in sglang_exec.FAMILIES.values()}
        | {c for _, c, _ in vllm_exec.FAMILIES.values()}
        | {a for f in _named_records().values() for a in f.architectures}
    )


def enumerate_families(src_dir, releases: dict[str, list[str]]) -> dict:
    """{"served": engine -> version -> [architecture], "families": name -> record, "not_modelled": arch -> why}."""
    full: dict[str, dict[str, dict]] = {
        "sglang": {v: sglang_exec.served_targets(src_dir("sglang", v)) for v in releases["sglang"]},
        "vllm": {v: vllm_exec.served_targets(src_dir("vllm", v)) for v in releases["vllm"]},
    }
    served = {e: {v: sorted(got) for v, got in vs.items()} for e, vs in full.items()}
    archs = sorted({a for e in served.values() for lst in e.values() for a in lst})
    types = _hf_types()
    named = named_architectures()
    taken = {mt for c in named for mt in types.get(c, ())} | {mt for f in _named_records().values() for mt in f.model_types}
    families: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    claims: dict[str, list[str]] = {}  # model_type -> the served architectures transformers maps it to
    for arch in archs:
        if arch not in named:
            for mt in types.get(arch, ()):
                claims.setdefault(mt, []).append(arch)
    for arch in archs:
        if arch in named:
            continue
        mts = sorted(types.get(arch, ()))
        # a model_type two served classes share cannot tell a config's family: matched by architecture only
        free = [mt for mt in mts if mt not in taken and len(claims[mt]) == 1]
        if not mts:
            skipped[arch] = "no Hugging Face model_type maps to this class (remote code): a config cannot be matched to it"
            continue
        if not free:
            skipped[arch] = (
                f"its model_type(s) {mts} name another family's class too (the harness's named families, or another "
                "served class): a config of this type cannot be told apart"
            )
            continue
        taken.update(free)
        newest = {e: next((v for v in reversed(releases[e]) if arch in served[e][v]), None) for e in served}
        families[free[0]] = {
            "architectures": [arch],
            # where the newest release that serves it keeps the class (an older release without it: absent)
            "sglang_file": full["sglang"][newest["sglang"]][arch] if newest["sglang"] else f"<{arch}>.py",
            "vllm_file": list(full["vllm"][newest["vllm"]][arch]) if newest["vllm"] else [f"<{arch}>.py", arch],
            "model_types": free,
            "vllm_model_type": text_model_type(free[0]),
            "sglang_class": arch,
        }
    return {"served": served, "families": families, "not_modelled": skipped}


# --------------------------------------------------------------------------- rows from the executed code


def _unmodelled(src: str, why: str) -> dict:
    return {"rule": "unmodelled", "src": src, "why": why}


def derive_sglang_row(rel: sglang_exec.Release, info: dict) -> dict:
    """The engine-table row (table.Row fields) that reproduces this release's executed capture for the family."""
    src = info["file"].replace("sglang/", "", 1)
    if info.get("absent"):
        return {"rule": "absent", "src": src}
    if info.get("setter") is None:
        return {"rule": "unsupported", "src": src}
    pat = info.get("pattern") or {"moved": "no inner model forward found"}
    if "moved" in pat:
        return _unmodelled(src, f"capture loop not matched: {pat['moved']}")
    setter = info["setter"]
    row: dict = {"src": f"{setter['file'].replace('sglang/', '', 1)} ({setter['class']}.set_eagle3_layers_to_capture)"}
    row["reads"] = "nested" if rel.reader else "none"
    row["aux_flag"] = (
        rel.reader is not None and rel.read_ids({"eagle_config": {IDS: [1, 2, 3], "use_aux_hidden_state": False}})[1] is False
    )
    row["loop"] = "after" if pat["kind"] == "after" else "before"
    row["guard0"] = bool(pat.get("guard0"))
    row["end"] = bool(pat.get("end"))
    row["packer"] = bool(pat.get("packer"))
    row["branch"] = bool(pat.get("branch"))

    def internal(L: int, ids) -> list[int] | str:
        cfg = {} if ids is None else {"eagle_config": {IDS: ids}}
        res = rel.run(info, L, cfg)
        if "internal" in res:
            return list(res["internal"])
        return res.get("error", "?")

    L = 32
    if internal(L, None) != [2, L // 2, L - 3] or internal(61, None) != [2, 30, 58]:
        return _unmodelled(src, f"default ids {internal(L, None)} at L={L}, not [2, L//2, L-3]")
    if sglang_exec.setter_arity(setter["src"]) < 2:
        row["rule"] = "default_only"
        return row
    plus = {k: internal(L, ids) for k, ids in (("p3", [3, 10, 20]), ("p1", [1, 10, 20]), ("pL", [2, 10, L]))}
    if plus["p3"] == [4, 11, 21] and plus["p1"] == [2, 11, 21]:
        row["rule"] = "maxL" if plus["pL"] == [2, 10, L] else "plus1"
    elif plus["p3"] == [3, 10, 20] and plus["p1"] == [2, 11, 21]:
        row["rule"] = "first1"
    else:
        return _unmodelled(src, f"setter rule not recognised: {plus}")
    # an id past the last layer after the +1: does the setter index self.layers (qwen2_moe.py) and raise?
    over = rel.run(info, L, {"eagle_config": {IDS: [2, 10, L - 1]}})
    row["index_check"] = row["rule"] == "plus1" and "IndexError" in str(over.get("error", ""))
    return row


def derive_vllm_row(rel: vllm_exec.Release, info: dict) -> dict:
    src = info["file"].replace("vllm/", "", 1)
    if info.get("absent"):
        return {"rule": "absent", "src": src}
    if info.get("elsewhere"):
        return _unmodelled(info["elsewhere"], "registered outside model_executor/models: capture not executed")
    if rel.check and info.get("model_type") is None:
        return _unmodelled(src, "the text config's model_type, which the release's target check reads, is the checkpoint's")
    if not info["supports_eagle3"] and (rel.iface_checked or not info.get("default")):
        return {"rule": "unsupported", "src": src}
    pat = info.get("pattern") or {"moved": "no inner model forward found"}
    if "moved" in pat:
        return _unmodelled(src, f"capture loop not matched: {pat['moved']}")
    if pat["kind"] == "after" and not pat.get("embed"):
        return _unmodelled(src, "after-layer capture without the embeddings at id 0")
    for L in (32, 61):
        got = rel.run({**info, "check": None}, L, {})
        if got.get("internal") != [2, L // 2, L - 3]:
            return _unmodelled(src, f"default ids {got.get('internal', got.get('error'))} at L={L}, not [2, L//2, L-3]")
    fwd = info.get("forward", {})
    row = {
        "rule": "raw",
        "src": f"{fwd.get('file', info['file']).replace('vllm/', '', 1)} ({fwd.get('class', info['class'])}.forward)",
    }
    row["loop"] = "after" if pat["kind"] == "after" else "before"
    row["guard0"] = bool(pat.get("guard0"))
    row["end"] = bool(pat.get("end")) or pat["kind"] == "after"
    return row


def add_row(rows: list[dict], version: str, row: dict) -> None:
    """Append the release's row, or extend the last one when nothing that decides capture changed."""
    if rows and {k: v for k, v in rows[-1].items() if k != "first"} == row:
        return
    rows.append({"first": version if rows else "0.0", **row})


def package_table(enumerated: dict, rows: dict[str, dict[str, list[dict]]]) -> dict:
    return {
        "about": "Target families each sglang/vllm release serves with an EAGLE-3 draft, enumerated from the releases' own "
        "registries, and their engine-table rows derived from the executed capture code; written by `make conformance` "
        "(conformance/families_enum.py). Read by eagle3_doctor/engines/families.py and table.py.",
        "families": enumerated["families"],
        "rows": rows,
        "not_modelled": enumerated["not_modelled"],
        "served": {e: {v: a for v, a in vs.items()} for e, vs in enumerated["served"].items()},
    }


def write(root: Path, table: dict) -> None:
    import json

    (root / PACKAGE_TABLE).write_text(json.dumps(table, indent=1) + "\n")
