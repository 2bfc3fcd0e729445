"""`make conformance`: fetch every covered release, execute its capture code, write table.json.

Rows: releases whose capture code (the setter/reader/default/check functions as source, and the
decoder-loop capture lines) hashes the same share one row; the row is executed from its first
release and lists every release it covers. Outcomes (the executed results over the grid) are
stored once per distinct behaviour and referenced by rows.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dflash_exec  # noqa: E402
import draft_exec  # noqa: E402
import families_enum  # noqa: E402
import fetch  # noqa: E402
import kvdtype_exec  # noqa: E402
import modelopt_exec  # noqa: E402
import mtp_exec  # noqa: E402
import mtp_stubs  # noqa: E402
import peagle_exec  # noqa: E402
import sglang_exec  # noqa: E402
import spec_defaults_exec  # noqa: E402
import trtllm_exec  # noqa: E402
import vllm_exec  # noqa: E402
import weightfiles_exec  # noqa: E402
from releases import RELEASES  # noqa: E402

IDS = "eagle_aux_hidden_state_layer_ids"
LS = (8, 32, 61)


def id_lists(L: int) -> list[list[int]]:
    """The id grid for an L-layer target (13 lists)."""
    h = L // 2
    return [
        [2, h, L - 3],  # sorted, before-layer numbering of the EAGLE default
        [1, h - 1, L - 4],  # sorted, after-layer numbering
        [h, 2, L - 3],  # unsorted
        [2, 2, h],  # duplicates
        [-1, 2, h],  # -1 first (the seed's "fix")
        [0, 2, h],  # 0
        [1, h, L - 1],  # first id 1, last L-1
        [2, h, L],  # L
        [2, h, L + 5],  # out of range
        [L - 3, L - 2, L - 1],  # the deep end
        [h],  # a single id
        [3, h, L - 2],  # first id not 1
        [],  # empty list
    ]


def layouts(ids: list[int]) -> dict[str, dict]:
    other = [1, 2, 3] if ids != [1, 2, 3] else [4, 5, 6]
    return {
        "nested": {"eagle_config": {IDS: ids}},
        "top": {IDS: ids},
        "both": {IDS: ids, "eagle_config": {IDS: other}},  # both keys, disagreeing: top = ids, nested = other
        "nested_aux_off": {"eagle_config": {IDS: ids, "use_aux_hidden_state": False}},
    }


def cases():
    for L in LS:
        yield L, "none", None, {}
        for ids in id_lists(L):
            for lay, cfg in layouts(ids).items():
                yield L, lay, ids, cfg


# ModelOpt takes its ids from the eagle config it is converted with (exported nested); the small depths
# show what its default does to targets with fewer than 7 layers
MODELOPT_LS = (4, 5, 6, 8, 32, 61)


def modelopt_cases():
    for L in MODELOPT_LS:
        yield L, "none", None, None
        for ids in id_lists(L):
            yield L, "nested", ids, ids


def case_key(L: int, layout: str, ids) -> str:
    return f"{L}|{layout}|{'-' if ids is None else ','.join(map(str, ids))}"


def encode(res: dict) -> str:
    if "error" in res:
        return f"!{res.get('when', 'start-up')}: {res['error']} @ {res.get('at', '?')}"
    return ",".join(res["points"])


def sources(info: dict) -> dict:
    out = {}
    for k in ("reader", "setter", "model_setter", "default", "check", "forward"):
        v = info.get(k)
        if v:
            out[k] = f"{v['file']}:{v['line']}"
    d = info.get("delegate") or {}
    for k in ("setter", "model_setter"):
        if d.get(k):
            out[f"delegate_{k}"] = f"{d[k]['file']}:{d[k]['line']}"
    if "pop" in info:  # modelopt
        for k in ("_set_default_aux_hidden_state_layers", modelopt_exec.HOOKED[0], "pop", "modify"):
            out[k] = f"{info['file']}:{info[k]['line']}"
        out["fc"] = info["fc"]
    return out


def dump_table(table: dict) -> str:
    """table.json: an outcome whose every case is the same string (a start-up refusal, a family not executed) is
    written once as {"*": that string}; readers expand it over grid.cases (grid.modelopt.cases for ModelOpt)."""
    outcomes = {oid: ({"*": next(iter(t.values()))} if len(set(t.values())) == 1 else t) for oid, t in table["outcomes"].items()}
    return json.dumps({**table, "outcomes": outcomes}, indent=1, sort_keys=False) + "\n"


def _guarded(execute):
    """An enumerated family whose capture the harness cannot match is recorded as such, never run on a guess."""

    def run(info: dict, L: int, cfg: dict) -> dict:
        if info.get("unmodelled"):
            return {"error": f"capture not executed: {info['unmodelled']}", "at": info["file"], "when": "not modelled"}
        return execute(info, L, cfg)

    return run


def main() -> int:
    t0 = time.time()
    fetch.main()
    t_fetch = time.time() - t0
    rows: list[dict] = []
    outcomes: dict[str, dict] = {}
    release_rows: dict[str, dict] = {}
    n_cases = 0

    def add(engine: str, family: str, runner: str, version: str, info: dict, key: str, execute, grid=None) -> None:
        nonlocal n_cases
        for r in rows:
            if (r["engine"], r["family"], r["runner"], r["code_hash"]) == (engine, family, runner, key):
                r["releases"].append(version)
                release_rows.setdefault(engine, {}).setdefault(version, {})[f"{family}/{runner}"] = r["id"]
                return
        table = {}
        for L, lay, ids, cfg in (grid or cases)():
            try:
                table[case_key(L, lay, ids)] = encode(execute(info, L, cfg))
            except (sglang_exec.PatternMoved, modelopt_exec.PatternMoved) as e:
                raise SystemExit(
                    f"conformance: {engine} {version} {family} ({runner}): the capture code moved: {e}. "
                    "Read the new source and teach conformance/*_exec.py its pattern."
                ) from None
            n_cases += 1
        oid = hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()[:10]
        outcomes.setdefault(oid, table)
        row = {
            "id": f"{engine}/{family}/{runner}/{key}",
            "engine": engine,
            "family": family,
            "runner": runner,
            "code_hash": key,
            "executed_from": version,
            "releases": [version],
            "sources": sources(info),
            "pattern": info.get("pattern"),
            "outcome": oid,
        }
        rows.append(row)
        release_rows.setdefault(engine, {}).setdefault(version, {})[f"{family}/{runner}"] = row["id"]

    t_enum = time.time()
    enum = families_enum.enumerate_families(fetch.src_dir, RELEASES)
    derived: dict[str, dict[str, list[dict]]] = {"sglang": {}, "vllm": {}}
    for v in RELEASES["sglang"]:
        rel = sglang_exec.Release(fetch.src_dir("sglang", v), v)
        for fam in sglang_exec.FAMILIES:
            info = rel.family_code(fam)
            add("sglang", fam, "default", v, info, rel.key(info), rel.run)
        registered = sglang_exec.entry_classes(rel.root)
        for fam, rec in enum["families"].items():
            arch = rec["architectures"][0]
            info = rel.family_code(fam, (registered.get(arch, rec["sglang_file"]), arch))
            row = families_enum.derive_sglang_row(rel, info)
            families_enum.add_row(derived["sglang"].setdefault(fam, []), v, row)
            info["unmodelled"] = row.get("why")
            add("sglang", fam, "default", v, info, rel.key(info) + ("~" if row.get("why") else ""), _guarded(rel.run))
    for v in RELEASES["vllm"]:
        rel = vllm_exec.Release(fetch.src_dir("vllm", v), v)
        registry = vllm_exec._registry(rel.root)
        for runner in rel.runners():
            for fam in vllm_exec.FAMILIES:
                info = rel.family_code(fam, runner)
                add("vllm", fam, runner, v, info, rel.key(info), rel.run)
            for fam, rec in enum["families"].items():
                arch = rec["architectures"][0]
                file, cls = registry.get(arch, rec["vllm_file"])
                info = rel.family_code(fam, runner, (file, cls, rec["vllm_model_type"]))
                row = families_enum.derive_vllm_row(rel, info)
                if runner == "v1":  # the rows do not depend on the runner: the key each runner reads is release-wide
                    families_enum.add_row(derived["vllm"].setdefault(fam, []), v, row)
                info["unmodelled"] = row.get("why")
                add("vllm", fam, runner, v, info, rel.key(info) + ("~" if row.get("why") else ""), _guarded(rel.run))
    t_enum = time.time() - t_enum
    for v in RELEASES["nvidia-modelopt"]:
        rel = modelopt_exec.Release(fetch.src_dir("nvidia-modelopt", v), v)
        try:
            info = rel.code()
        except modelopt_exec.PatternMoved as e:
            raise SystemExit(
                f"conformance: nvidia-modelopt {v}: the capture code moved: {e}. "
                "Read the new source and teach conformance/modelopt_exec.py its shape."
            ) from None
        add("modelopt", "all", "hf", v, info, rel.key(info), rel.run, modelopt_cases)
    table = {
        "about": "Executed EAGLE-3 capture behaviour of every covered sglang/vllm release; written by `make conformance` "
        "(conformance/run.py). Result strings: comma-separated capture points, or '!<when>: <error> @ <file:line>'.",
        "grid": {
            "L": list(LS),
            "ids_per_L": len(id_lists(8)),
            "layouts": ["none", *layouts([]).keys()],
            "modelopt": {"L": list(MODELOPT_LS), "layouts": ["none", "nested"]},
        },
        "releases": {("modelopt" if e == "nvidia-modelopt" else e): list(vs) for e, vs in RELEASES.items()},
        "release_rows": release_rows,
        "rows": rows,
        "outcomes": outcomes,
    }
    table["served"] = enum["served"]
    table["grid"]["cases"] = [case_key(L, lay, ids) for L, lay, ids, _ in cases()]
    table["grid"]["modelopt"]["cases"] = [case_key(L, lay, ids) for L, lay, ids, _ in modelopt_cases()]
    out = HERE / "table.json"
    out.write_text(dump_table(table))
    families_enum.write(HERE.parent, families_enum.package_table(enum, derived))
    print(
        f"conformance: {len(enum['families'])} families enumerated beyond the named ones, "
        f"{len(enum['not_modelled'])} architectures not modelled; capture tables in {t_enum:.0f} s"
    )
    _package_table(draft_exec, draft_exec.DraftCodeMoved, "EAGLE-3 draft", "draft_exec.py its stubs")
    _package_table(kvdtype_exec, kvdtype_exec.KvCodeMoved, "draft KV dtype", "kvdtype_exec.py its shape")
    _package_table(weightfiles_exec, weightfiles_exec.WeightFilesMoved, "draft weight-file", "weightfiles_exec.py its shape")
    _package_table(spec_defaults_exec, spec_defaults_exec.TreeCodeMoved, "SGLang tree-default", "spec_defaults_exec.py its shape")
    _package_table(dflash_exec, dflash_exec.DflashCodeMoved, "DFlash", "dflash_exec.py its shape")
    _package_table(peagle_exec, peagle_exec.PeagleCodeMoved, "P-EAGLE", "peagle_exec.py its shape")
    _package_table(mtp_exec, mtp_stubs.MTPCodeMoved, "MTP", "mtp_stubs.py its stubs")
    t_trt = time.time()
    try:  # from the excerpts in the cache; without them the committed table stays (trtllm_exec says so)
        trtllm_exec.main([])
    except trtllm_exec.CodeMoved as e:
        raise SystemExit(f"conformance: {e}. Read the new source and teach conformance/trtllm_exec.py its stubs.") from None
    print(f"conformance: TensorRT-LLM table in {time.time() - t_trt:.1f} s")
    n_rel = sum(len(v) for v in RELEASES.values())
    print(
        f"conformance: {n_rel} releases, {len(rows)} rows, {len(outcomes)} distinct outcomes, {n_cases} cases executed "
        f"(fetch {t_fetch:.0f} s, total {time.time() - t0:.0f} s) -> {out.relative_to(HERE.parent)}"
    )
    return 0


def _package_table(module: Any, moved: type[Exception], what: str, teach: str) -> None:
    """One of the package's tables built from every release's own source and written where the package reads it; a
    release whose code moved stops the run, naming the file to teach its new shape."""
    t = time.time()
    try:
        table = module.build_table(fetch.src_dir, RELEASES)
    except moved as e:
        raise SystemExit(f"conformance: {e}. Read the new source and teach conformance/{teach}.") from None
    (HERE.parent / module.PACKAGE_TABLE).write_text(json.dumps(table, indent=1) + "\n")
    rows = f"{len(table['rows'])} rows " if isinstance(table, dict) and "rows" in table else ""
    print(f"conformance: {what} table {rows}in {time.time() - t:.1f} s -> {module.PACKAGE_TABLE}")


if __name__ == "__main__":
    raise SystemExit(main())
