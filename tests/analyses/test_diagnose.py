"""diagnose: where the acceptance gap lives, measured by intervention, ablation and context, through the CLI."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, FIX, PROMPTS, TARGET, invoke, random_draft, two_layer_draft
from safetensors.torch import load_file, save_file

FAST = ("--prompts", PROMPTS, "--limit", "10", "--max-new-tokens", "48", "--num-steps", "4", "--quiet")


def diagnose(tmp_path, draft=DRAFTS["sglang"], *args) -> tuple[int, dict, str]:
    out = tmp_path / f"diagnose{len(list(tmp_path.glob('diagnose*.json')))}.json"
    r = invoke("diagnose", "--target", TARGET, "--draft", draft, "--engine", "sglang", "--json", out, *FAST, *args)
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    validate(doc)
    return r.exit_code, doc, r.output


def validate(doc: dict) -> None:
    """Every diagnose and fix document against its schema (generated from the result classes)."""
    jsonschema = pytest.importorskip("jsonschema")
    name, version = doc["schema"].split("/")[1:]
    jsonschema.validate(doc, json.loads((TARGET.parent.parent / "schemas" / f"{name}.v{version}.schema.json").read_text()))


def by_code(doc: dict) -> dict[str, dict]:
    return {f["code"]: f for f in doc["findings"]}


def reinit_attention(tmp_copy):
    """A copy of the SGLang draft whose attention is at initialisation (normal(0, 0.02)), as a non-strict
    load under a renamed key leaves it."""
    d = tmp_copy(DRAFTS["sglang"], "draft-reinit")
    sd = load_file(d / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    for k in [k for k in sd if k.startswith("midlayer.self_attn.")]:
        sd[k] = torch.randn(sd[k].shape, generator=g) * 0.02
    save_file(sd, d / "model.safetensors")
    return d


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return diagnose(tmp_path_factory.mktemp("clean"))


def test_clean_fixtures_give_no_warning(clean):
    code, doc, _ = clean
    assert code == 0
    assert [f["code"] for f in doc["findings"] if f["severity"] != "info"] == []
    assert doc["branch"] == "runtime" and "DGN005" in by_code(doc)
    # every module of a trained draft costs step-1 accuracy when mean-ablated
    assert all(m["verdict"] == "trained" and m["cost"]["lo"] > 0 for m in doc["modules"]), doc["modules"]


def test_the_seed_incident_is_the_capture_lever_with_its_fix(tmp_path, clean):
    # [-1, 1, 3] on SGLang: slot 0 gets the embeddings and the rest shift (the incident's id list, as a launch writes it)
    code, doc, out = diagnose(tmp_path, DRAFTS["sglang"], "--layer-ids=-1,1,3", "--report", tmp_path / "report")
    assert code == 1 and doc["branch"] == "pipeline"
    md = (tmp_path / "report" / "diagnose.md").read_text()
    assert doc["verdict"] in md and "| capture points |" in md and "![levers and module ablation](diagnose.png)" in md
    assert (tmp_path / "report" / "diagnose.png").read_bytes()[:4] == b"\x89PNG"
    f = by_code(doc)["DGN001"]
    assert f["data"]["lever"] == "capture points" and "[1, 3, 4]" in f["fix"]
    top = doc["levers"][0]
    assert top["name"] == "capture points" and top["recovery"]["lo"] > 0
    assert doc["gap"]["lo"] > 0 and doc["serving"]["point"] < clean[1]["serving"]["point"]
    # setting the lever back is the training side: it recovers the whole gap
    assert top["recovery"]["point"] == pytest.approx(doc["gap"]["point"])
    assert out.startswith("verdict: the gap lives in the pipeline")


def test_a_reinitialised_attention_is_named_by_ablation(tmp_path, tmp_copy):
    # the decoder layer's attention saved at initialisation (a non-strict load under a renamed key)
    d = reinit_attention(tmp_copy)
    code, doc, _ = diagnose(tmp_path, d)
    assert code == 1 and doc["branch"] == "checkpoint"
    f = by_code(doc)["DGN002"]
    assert f["data"]["module"] == "midlayer.self_attn"
    assert [f["data"]["module"] for f in doc["findings"] if f["code"] == "DGN002"] == ["midlayer.self_attn"]
    mods = {m["module"]: m["verdict"] for m in doc["modules"]}
    # the MLP was trained next to a working attention: ablating it now helps, a symptom, not the cause
    assert mods == {"fc": "trained", "midlayer.self_attn": "contributes nothing", "midlayer.mlp": "ablation helps"}


def test_acc002_no_longer_guesses():
    from eagle3_doctor.core.findings.registry import REGISTRY

    src = (TARGET.parent.parent / "eagle3_doctor" / "analyses" / "acceptance" / "findings.py").read_text()
    assert "lm_head, d2t/t2d, embeddings" not in src and "eagle3-doctor diagnose" in src
    assert "DGN001" in REGISTRY


def test_contexts_past_the_training_length_are_named_by_position(tmp_path):
    # multi-turn prompts of 600+ tokens from the fixture conversations; the fixture draft was trained on
    # 128-token sequences (fixtures/build.py --seq 128)
    convs = [json.loads(line) for line in (FIX / "conversations" / "openai.jsonl").read_text().splitlines()]
    prompts = [json.loads(line) for line in PROMPTS.read_text().splitlines()]
    long = tmp_path / "long.jsonl"
    with long.open("w") as f:
        for i in range(8):
            msgs = [m for j in range(5) for m in convs[(i + j) % len(convs)]["messages"]] + prompts[i]["messages"]
            f.write(json.dumps({"messages": msgs}) + "\n")
    out = tmp_path / "d.json"
    r = invoke(
        "diagnose", "--target", TARGET, "--draft", DRAFTS["sglang"], "--engine", "sglang", "--json", out,
        "--prompts", long, "--max-tokens", "448", "--max-new-tokens", "16", "--num-steps", "3", "--quiet",
    )  # fmt: skip
    doc = json.loads(out.read_text())
    f = by_code(doc)["DGN003"]
    assert r.exit_code == 0 and doc["branch"] == "context"  # a warning: the draft is fine inside its length
    assert 128 <= f["data"]["position"] <= 224, f
    # no module is blamed: they are all intact (the MLP's ablation may help out there, which names nothing)
    assert "DGN002" not in by_code(doc)


# --------------------------------------------------------------------------- fix: a corrected copy, re-measured


def _incident_copy(tmp_copy):
    """The seed incident written into the draft's own config: SGLang ids [-1, 1, 3]."""
    d = tmp_copy(DRAFTS["sglang"], "draft-incident")
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    return d


def test_fix_writes_a_copy_that_recovers_the_seed_incident(tmp_path, tmp_copy):
    d = _incident_copy(tmp_copy)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    out, js = tmp_path / "fixed", tmp_path / "fix.json"
    r = invoke(
        "fix", "--target", TARGET, "--draft", d, "--engine", "sglang", "--train-recipe", "specforge",
        "--out", out, "--json", js, *FAST,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(js.read_text())
    validate(doc)
    assert [f["code"] for f in doc["findings"]] == ["FIX001"] and doc["verdict"] == "recovered"
    assert doc["change"]["lo"] > 0 and doc["after"]["point"] > doc["before"]["point"]
    assert [(e["key"], e["before"], e["after"]) for e in doc["edits"]] == [
        ("eagle_config.eagle_aux_hidden_state_layer_ids", [-1, 1, 3], [1, 3, 4])
    ]
    assert json.loads((out / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # the input is untouched
    assert (out / "model.safetensors").read_bytes() == (d / "model.safetensors").read_bytes()


def test_fix_renames_the_later_layers_norm_the_engine_reads_in_its_copy(tmp_path):
    """A two-layer draft under SGLang 0.5.23, which normalises layer 1 with hidden_norm where the checkpoint
    holds input_layernorm (FWD009): the copy gets the tensor under SGLang's name, the input stays as it was,
    and inspect of the copy under the same release is quiet about it."""
    from safetensors import safe_open

    from eagle3_doctor.analyses.inspect.inspection import inspect

    d = two_layer_draft(tmp_path / "d2")
    before = {q.name: q.read_bytes() for q in d.iterdir()}
    out, js = tmp_path / "fixed", tmp_path / "fix.json"
    invoke("fix", "--target", TARGET, "--draft", d, "--engine", "sglang", "--engine-version", "0.5.23",
           "--out", out, "--json", js, *FAST)  # fmt: skip
    doc = json.loads(js.read_text())
    validate(doc)
    # (beside CAP007's edit: SGLang reads a speculators config's layer ids from another key)
    assert [(e["op"], e["before"], e["after"]) for e in doc["edits"] if e["code"] == "FWD009"] == [
        ("rewrite", "layers.1.input_layernorm.weight", "layers.1.hidden_norm.weight")
    ]
    with safe_open(str(out / "model.safetensors"), framework="pt") as h:
        keys = set(h.keys())
    assert "layers.1.hidden_norm.weight" in keys and "layers.1.input_layernorm.weight" not in keys
    assert {q.name: q.read_bytes() for q in d.iterdir()} == before
    assert "FWD009" not in {f.code for f in inspect(str(TARGET), str(out), engine="sglang", engine_version="0.5.23").findings}
    assert doc["verdict"] in ("recovered", "not recovered") and doc["change"] is not None


@pytest.mark.parametrize("where", ["exists", "inside"])
def test_fix_never_writes_over_or_into_the_input(tmp_path, tmp_copy, where):
    d = tmp_copy(DRAFTS["sglang"], "draft")
    out = d / "fixed" if where == "inside" else tmp_path
    r = invoke("fix", "--target", TARGET, "--draft", d, "--engine", "sglang", "--out", out, *FAST)
    assert r.exit_code == 2 and "--out" in r.output and "Traceback" not in r.output, r.output
    assert not (d / "fixed").exists()


def test_fix_says_when_no_config_edit_is_the_cure(tmp_path, tmp_copy):
    # a checkpoint cause (attention at initialisation): nothing in config.json to change
    d = reinit_attention(tmp_copy)
    js = tmp_path / "fix.json"
    r = invoke("fix", "--target", TARGET, "--draft", d, "--engine", "sglang", "--out", tmp_path / "o", "--json", js, *FAST)
    doc = json.loads(js.read_text())
    validate(doc)
    assert r.exit_code == 1 and [f["code"] for f in doc["findings"]] == ["FIX002"] and not doc["edits"]
    assert not (tmp_path / "o").exists() and doc["diagnosis"]["branch"] == "checkpoint"


def test_ids_edited_after_training_are_found_by_the_weights_alone(tmp_path, tmp_copy):
    # the incident's ids written into the config and no training recipe: the draft's own config now
    # claims [-1, 1, 3], so serving equals "training"; the weights still fit layer_out[1, 3, 4]
    d = _incident_copy(tmp_copy)
    code, doc, _ = diagnose(tmp_path, d)
    assert code == 1 and doc["branch"] == "pipeline" and doc["gap"]["point"] == 0
    f = by_code(doc)["DGN001"]
    assert f["data"]["lever"] == "capture points the weights fit" and "[1, 3, 4]" in f["fix"]
    assert f["title"].startswith("feeding the capture points the weights fit recovers")
    assert doc["levers"][0]["recovery"]["lo"] > 0


def test_prompts_with_pasted_chat_markup_are_reported(tmp_path):
    # a client that renders ChatML itself and sends the result as one user message; the fixture target's
    # template writes <|user|> turns, so its own markup is never reported
    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines()][:8]
    for r in rows[:3]:
        text = r["messages"][0]["content"]
        r["messages"][0]["content"] = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    pasted = tmp_path / "pasted.jsonl"
    pasted.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "d.json"
    args = ("--prompts", pasted, "--max-new-tokens", "16", "--num-steps", "3", "--quiet")
    invoke("diagnose", "--target", TARGET, "--draft", DRAFTS["sglang"], "--engine", "sglang", "--json", out, *args)
    f = by_code(json.loads(out.read_text()))["DGN006"]
    assert f["data"] == {"families": ["ChatML (Qwen, many fine-tunes)"], "prompts": 3}
    assert "prompt(s) 1, 2, 3" in " ".join(f["evidence"])


def test_a_serving_side_nobody_modelled_is_undetermined_with_the_engine_finding(tmp_path, tmp_copy):
    # a SmolLM3 target: no SGLang or vLLM release serves SmolLM3ForCausalLM with an EAGLE-3 draft, so the family
    # enumeration has no row for it (ENG004): the serving side is not measured and diagnose says so instead of
    # calling the training side "as served"
    t = tmp_copy(TARGET, "target-smollm3")
    cfg = json.loads((t / "config.json").read_text())
    cfg.update(model_type="smollm3", architectures=["SmolLM3ForCausalLM"])
    (t / "config.json").write_text(json.dumps(cfg))
    import torch
    from safetensors.torch import load_file, save_file

    sd = load_file(t / "model.safetensors")  # Qwen2 has q/k/v biases: zero ones keep the Llama weights' function
    for i in range(cfg["num_hidden_layers"]):
        for p in "qkv":
            w = sd[f"model.layers.{i}.self_attn.{p}_proj.weight"]
            sd[f"model.layers.{i}.self_attn.{p}_proj.bias"] = torch.zeros(w.shape[0], dtype=w.dtype)
    save_file(sd, t / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "d.json"
    invoke("diagnose", "--target", t, "--draft", DRAFTS["sglang"], "--engine", "sglang", "--json", out, *FAST)
    doc = json.loads(out.read_text())
    validate(doc)
    assert doc["branch"] == "undetermined" and "ENG004" in by_code(doc) and "DGN005" not in by_code(doc)


def test_too_few_prompts_leaning_on_a_cause_is_undetermined_not_healthy(tmp_copy):
    """The seed's ids written into the config, diagnosed on 4 prompts: the weights lean towards the trained
    points but 4 prompts decide nothing; the verdict names that and what would decide, never "healthy"."""
    d = tmp_copy(DRAFTS["sglang"], "incident")
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg))
    r = invoke(
        "diagnose",
        "-t",
        TARGET,
        "--draft",
        d,
        "--engine",
        "sglang",
        "--prompts",
        PROMPTS,
        "--limit",
        "4",
        "--max-new-tokens",
        "24",
    )
    assert "DGN005" not in r.output and "healthy" not in r.output.split("verdict:")[1].splitlines()[0]
    assert "warning[DGN004]" in r.output and "4 prompts" in r.output and "more prompts" in r.output
    assert "layer_out[1], layer_out[3], layer_out[4]" in r.output  # the lead it leans towards


def test_each_served_forward_difference_is_set_back_alone_and_the_one_that_costs_is_named(tmp_path, tmp_copy):
    """Two differences in how vLLM runs the draft: norm_before_residual missing from a speculators config
    (vLLM's adapter then defaults it on, the weights were trained off), and q/k norms in the weights that
    vLLM drops because the config does not say Qwen3 (random here, so running them hurts). Set back
    together they lose acceptance; one at a time, the first recovers and is the verdict, with its own edit."""
    d = tmp_copy(DRAFTS["speculators"], "draft-two-differences")
    c = json.loads((d / "config.json").read_text())
    c.pop("norm_before_residual")
    (d / "config.json").write_text(json.dumps(c))
    sd = load_file(d / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    for k in ("q_norm", "k_norm"):
        sd[f"layers.0.self_attn.{k}.weight"] = 1 + 0.3 * torch.randn(32, generator=g)
    save_file(sd, d / "model.safetensors")
    code, doc, _ = diagnose(tmp_path, d, "--engine", "vllm", "--engine-version", "0.33.0")
    levers = {r["name"]: r for r in doc["levers"]}
    assert set(levers) == {"draft forward", "draft forward FWD001", "draft forward FWD008"}
    assert "part_of" not in levers["draft forward"]
    assert {levers[n]["part_of"] for n in ("draft forward FWD001", "draft forward FWD008")} == {"draft forward"}
    assert levers["draft forward FWD001"]["recovery"]["lo"] > 0 > levers["draft forward"]["recovery"]["hi"]
    assert levers["draft forward FWD008"]["recovery"]["hi"] < 0
    f = by_code(doc)["DGN001"]
    assert code == 1 and f["data"]["lever"] == "draft forward FWD001"
    assert '"norm_before_residual": false' in f["fix"] and "q_norm" not in f["fix"]


FRENCH = [
    "Le petit chat dort sur le canapé pendant que la pluie tombe doucement sur les toits de la ville.",
    "Nous avons visité le marché samedi matin et acheté des fromages, du pain frais et des cerises.",
    "Après le dîner, mon frère a raconté une histoire étrange sur un château abandonné dans les montagnes.",
    "La bibliothèque municipale ouvrira ses portes plus tôt cet été pour accueillir les étudiants.",
    "Elle a appris à jouer du piano à six ans et donne aujourd'hui des concerts dans toute l'Europe.",
    "Le train de Lyon est arrivé avec une heure de retard à cause de la neige sur les voies.",
    "Les enfants ont construit une cabane dans le jardin avec des branches et de vieilles planches.",
    "Chaque automne, la forêt se couvre de rouge et d'or, et les promeneurs viennent de loin.",
    "Le vieux boulanger se lève à quatre heures pour préparer les croissants du village.",
    "La lettre est arrivée en retard, mais les nouvelles qu'elle contenait étaient excellentes.",
]


def test_prompts_unlike_the_training_data_are_the_data_verdict(tmp_path):
    """French prose sent to a draft trained on English requests for Python source: along its own training
    conversations it follows the target at 0.77 (positions before the context's fall), along the French
    at about 0.53, with the same features and forward: the verdict is the data. The fixture prompts (the
    training style) measured the same way are not."""
    french = tmp_path / "french.jsonl"
    french.write_text("".join(json.dumps({"messages": [{"role": "user", "content": t}]}) + "\n" for t in FRENCH))
    train = FIX / "conversations" / "openai.jsonl"
    _, doc, _ = diagnose(tmp_path, DRAFTS["sglang"], "--prompts", french, "--train-data", train)
    f = by_code(doc)["DGN007"]
    assert doc["branch"] == "data" and doc["findings"][0]["code"] == "DGN007"
    assert "DGN005" not in by_code(doc) and "DGN004" not in by_code(doc)  # decided: neither healthy nor undetermined
    assert f["data"]["step1_difference"][2] < 0 and "independent resamples" in f["evidence"][0]
    _, doc, _ = diagnose(tmp_path, DRAFTS["sglang"], "--train-data", train)
    assert "DGN007" not in by_code(doc) and any("predicted as well as the draft's training sample" in n for n in doc["notes"])


def test_the_data_verdict_reads_every_training_data_layout(tmp_path):
    """--train-data as ShareGPT rows and as input_ids/loss_mask rows (fixtures/build.py writes the same seven
    conversations each way, the rows through the target's template): the same data verdict, on the same
    figures, as the OpenAI messages."""
    french = tmp_path / "french.jsonl"
    french.write_text("".join(json.dumps({"messages": [{"role": "user", "content": t}]}) + "\n" for t in FRENCH))
    lines = {}
    for layout in ("openai", "sharegpt", "tokenized"):
        train = FIX / "conversations" / f"{layout}.jsonl"
        _, doc, _ = diagnose(tmp_path, DRAFTS["sglang"], "--prompts", french, "--train-data", train)
        assert doc["branch"] == "data" and doc["findings"][0]["code"] == "DGN007", (layout, doc["branch"])
        lines[layout] = by_code(doc)["DGN007"]["evidence"][0].replace(str(train), "TRAIN")
    assert lines["sharegpt"] == lines["tokenized"] == lines["openai"], lines


def test_the_targets_choice_along_its_continuation_runs_the_head_over_the_prompts_alone(setup_sglang, monkeypatch):
    """diagnose's context counts read the target's next-token choice at every position: along its own greedy
    continuation the continuation's tokens past each prompt, the full-vocabulary head over the prompts' positions
    only; every choice equal to the head's over every position (float32, the fixture pair)."""
    from eagle3_doctor.analyses.acceptance import measurement
    from eagle3_doctor.model import target as target_mod
    from eagle3_doctor.model.continuation import greedy_continue
    from eagle3_doctor.model.replay import iter_captures

    tgt = setup_sglang.target
    prompts = [tgt.tokenizer(t)["input_ids"] for t in ("def calendar module", "import return self year fractions")]
    seqs = greedy_continue(tgt, prompts, 12, 2)
    starts = {i: len(p) - 1 for i, p in enumerate(prompts)}
    rows: list[int] = []
    real = target_mod.target_argmax
    monkeypatch.setattr(target_mod, "target_argmax", lambda t, h, *a: (rows.append(h.reshape(-1, h.shape[-1]).shape[0]), real(t, h, *a))[1])  # fmt: skip
    for rb in iter_captures(tgt, seqs, [], batch_size=2, want_logits=True):
        st = [starts[i] for i in rb.index]
        got = measurement.target_choice(tgt, rb, st, greedy=True)
        assert rows == [sum(st)]  # the head ran over the prompts' positions before their last, nothing more
        want = real(tgt, rb.last)
        for j, i in enumerate(rb.index):
            n = len(seqs[i])
            assert torch.equal(got[j, : n - 1], want[j, : n - 1])
        assert torch.equal(measurement.target_choice(tgt, rb, st, greedy=False), want)


def test_context_counts_are_each_positions_hit_in_its_bucket(monkeypatch):
    """The context buckets count, per prompt, step-1 hits and positions at every valid position from its start:
    counted a bucket at a time over the batch, the same numbers a walk over each position gives."""
    from types import SimpleNamespace

    import numpy as np

    from eagle3_doctor.analyses.acceptance.estimator import StepOutputs
    from eagle3_doctor.analyses.attribution import context

    g = torch.Generator().manual_seed(3)
    B, T = 4, 70
    match = torch.rand(B, 1, T, generator=g) < 0.6
    valid = torch.rand(B, 1, T, generator=g) < 0.9
    monkeypatch.setattr(context, "unroll_outcomes", lambda *a, **k: StepOutputs(match, valid))
    rb = SimpleNamespace(index=[5, 0, 2, 7], tokens=torch.zeros(B, T, dtype=torch.long), batch=SimpleNamespace(lengths=[T] * B))
    starts = [0, 9, 33, 69]
    ctx = context.ContextCounts(16, 8)
    ctx.add(rb, None, None, None, starts)
    want: dict[int, np.ndarray] = {}
    for row, i in enumerate(rb.index):
        for t in range(starts[row], T):
            if valid[row, 0, t]:
                c = want.setdefault(t // 16, np.zeros((8, 2)))
                c[i] += (float(match[row, 0, t]), 1.0)
    assert want.keys() == ctx.counts.keys()
    assert all(np.array_equal(want[b], ctx.counts[b]) for b in want)


def test_step_one_counted_from_the_base_paths_unroll_gives_the_document_a_second_draft_pass_gives(tmp_path, monkeypatch):
    """diagnose counts the context buckets and the unablated step 1 from the step-1 proposals the base path's unroll
    made for the batch; run again with the draft (the proposals withheld), the document is the same, field for field,
    on a seed-shifted draft whose context and paths differ."""
    from eagle3_doctor.analyses.acceptance.measurement import Measurement
    from eagle3_doctor.analyses.attribution import context

    counted: list[int] = []
    count = context.step1_outcomes
    monkeypatch.setattr(context, "step1_outcomes", lambda *a: (counted.append(1), count(*a))[1])
    code, reused, _ = diagnose(tmp_path, DRAFTS["sglang"], "--layer-ids=-1,1,3")
    assert counted  # the proposals were read, not made again
    real = Measurement.add
    ran: list[int] = []

    def withheld(self, rb):
        real(self, rb)
        ran.append(len(self.outcomes))
        self.outcomes = {}

    monkeypatch.setattr(Measurement, "add", withheld)
    counted.clear()
    code2, again, _ = diagnose(tmp_path, DRAFTS["sglang"], "--layer-ids=-1,1,3")
    assert ran and not counted and code == code2
    drop = {"json_out", "timing", "elapsed_s"}
    assert {k: v for k, v in reused.items() if k not in drop} == {k: v for k, v in again.items() if k not in drop}


@pytest.mark.parametrize("window", [5, 40])
def test_a_window_of_step_one_counts_the_first_positions_from_each_start_on_a_cut_batch(window):
    """Module health counts step 1 at the first positions of each sequence from its start: the ablated draft runs on
    the batch cut after the last of them, and counts what the whole batch's step 1 counts there."""
    from types import SimpleNamespace

    import numpy as np

    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes
    from eagle3_doctor.analyses.attribution import context

    d = random_draft()
    g = torch.Generator().manual_seed(2)
    B, T = 3, 60
    aux, tokens = torch.randn(B, T, 192, generator=g), torch.randint(0, 100, (B, T), generator=g)
    with torch.no_grad():
        own = d.to_target_ids(d.logits(next(d.unroll(aux, torch.roll(tokens, -1, 1), 1))).argmax(-1))
    hits = torch.rand(B, T, generator=g) < 0.5  # labels: the draft's own proposal at about half the positions

    def labels(k: int) -> torch.Tensor:
        return torch.where(hits, own, torch.roll(tokens, -(1 + k), 1))

    rb = SimpleNamespace(index=[2, 0, 1], tokens=tokens, batch=SimpleNamespace(lengths=[T, T - 7, 30]))
    starts = [3, 11, 20]
    whole = unroll_outcomes(d, aux, tokens, labels, rb.batch.lengths, 1)
    cut, read = context.ContextCounts(1 << 40, 3, window), context.ContextCounts(1 << 40, 3, window)
    with torch.no_grad():
        cut.add(rb, d, aux, labels, starts)
    read.add(rb, d, aux, labels, starts, whole.first)
    want = np.zeros((3, 2))
    for row, i in enumerate(rb.index):
        for t in range(starts[row], starts[row] + window):
            if whole.valid[row, 0, t]:
                want[i] += (float(whole.match[row, 0, t]), 1.0)
    assert np.array_equal(cut.counts[0], want) and np.array_equal(read.counts[0], want) and want[:, 0].sum() > 0


def test_module_health_of_runs_within_the_step_one_window_is_what_every_position_gives(tmp_path, monkeypatch):
    """Runs of up to STEP1_POSITIONS new tokens (every calibration run) count every position: the document is the one
    an unbounded window gives."""
    from eagle3_doctor.analyses.attribution import measure

    _, windowed, _ = diagnose(tmp_path, DRAFTS["sglang"], "--layer-ids=-1,1,3")
    monkeypatch.setattr(measure, "STEP1_POSITIONS", None)
    _, every, _ = diagnose(tmp_path, DRAFTS["sglang"], "--layer-ids=-1,1,3")
    drop = {"json_out", "timing", "elapsed_s"}
    assert {k: v for k, v in windowed.items() if k not in drop} == {k: v for k, v in every.items() if k not in drop}
