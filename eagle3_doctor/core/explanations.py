"""The long form of every finding code: what it means, why acceptance drops, how to confirm it.

`eagle3-doctor explain CODE` prints one entry; tools/gen_docs.py writes them all into docs/findings.md.
tests/test_diagnostics.py keeps this table and findings.CODES the same set of codes.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Explanation:
    meaning: str  # what the finding says is wrong, in full
    why: str  # why the draft then accepts fewer tokens (or why it matters at all)
    confirm: str  # how the user checks it for themselves


_CAP_CONFIRM = (
    "run `eagle3-doctor compare-hidden` with the same --engine/--engine-version: the slot table shows what "
    "each slot is fed; `acceptance` then measures the cost on replayed prompts"
)

EXPLANATIONS: dict[str, Explanation] = {
    # --- capture points
    "CAP001": Explanation(
        "Every serving slot is the trained capture point moved by the same number of layers: the classic off-by-one. "
        "The same id list means different layers in different engines (SGLang's Llama path captures layer_out[k] for id k, "
        "vLLM layer_out[k-1]), so ids copied between engines, or written out from a default that is stored without "
        "the engine's +1, shift every slot.",
        "Adjacent layer outputs are similar but not interchangeable (cosine 0.90-0.98 on the fixtures): the draft's fc "
        "was fitted to specific layers, so its input moves off the trained distribution and step-1 accuracy falls "
        "while nothing crashes.",
        _CAP_CONFIRM,
    ),
    "CAP002": Explanation(
        "A slot trained on a layer output is fed the token embeddings. Typically an id of -1 or 0 that the engine maps "
        "to the embeddings, which also pushes the remaining trained points one slot later (the seed incident: "
        "[-1, 2, 30] instead of [2, 30, 58]).",
        "The embeddings carry no context at all, so the draft loses one third of its features and the other slots are "
        "permuted: acceptance per token fell from about 75% to about 30% in the seed case.",
        _CAP_CONFIRM,
    ),
    "CAP003": Explanation(
        "A slot trained on the pre-norm output of the last decoder layer is fed final_norm (the normalised state "
        "output_hidden_states returns last), or the reverse. vLLM id L and SGLang's GPT-OSS boundary are pre-norm; "
        "hs[L] in Hugging Face and TensorRT-LLM's -1 are post-norm.",
        "The two states differ in scale far more than their cosine (about 0.999) suggests; feeding final_norm for "
        "layer_out[L-1] cost 8 points of step-1 accuracy on the fixtures.",
        _CAP_CONFIRM + " (relative L2, not cosine, separates the two)",
    ),
    "CAP004": Explanation(
        "The engine feeds exactly the trained capture points but in another order. SGLang concatenates in the listed "
        "order; vLLM, TensorRT-LLM and ModelOpt sort the ids.",
        "The fc weight columns are tied to slot positions: a permutation feeds each block of fc the wrong layer.",
        _CAP_CONFIRM,
    ),
    "CAP005": Explanation(
        "The engine feeds a different number of slots than the draft's fc was trained on, e.g. an id dropped because "
        "it is past the last layer the engine can capture, or duplicates removed by an engine that de-duplicates.",
        "The fc input width no longer matches: the engine either refuses the checkpoint or feeds a truncated input.",
        _CAP_CONFIRM,
    ),
    "CAP006": Explanation(
        "Serving slots differ from the training slots in a way that is not a uniform shift, an embeddings slot, a "
        "norm swap or a permutation.",
        "Any slot fed another capture point moves the draft's input off the distribution it was trained on.",
        _CAP_CONFIRM,
    ),
    "CAP007": Explanation(
        "The draft config holds layer ids in a key this engine version never reads (SGLang reads only the nested "
        "eagle_config key; vLLM's Model Runner V2 only the top-level key). The engine uses its default or another key.",
        "Harmless when the default is what was trained (then reported as info); otherwise the configured ids have no "
        "effect and the engine silently serves its default.",
        "check which key the engine reads (docs/engines.md) and run `eagle3-doctor inspect` with --engine-version",
    ),
    "CAP008": Explanation(
        "The engine version captures with different ids in CUDA-graph decode than in eager prefill (SGLang before PR "
        "#22836 captured the decode/verify graphs with the default ids).",
        "Prefill is right and every decode step is fed other layers, so acceptance drops only with CUDA graphs on.",
        "run the server with --disable-cuda-graph: if acceptance recovers, this is the cause",
    ),
    "CAP009": Explanation(
        "No id list makes this engine capture what the draft was trained on (e.g. SGLang's Llama path never captures "
        "past layer_out[L-2]; only TensorRT-LLM's -1 reaches final_norm).",
        "Whatever ids are written, at least one slot is fed another capture point.",
        "compare the trained capture points with the engine's reachable range in docs/engines.md",
    ),
    "CAP010": Explanation(
        "The engine sorts or de-duplicates the configured ids before capturing (vLLM, TensorRT-LLM, ModelOpt).",
        "Only matters when the ids are not written in ascending order: then this engine and an order-keeping one "
        "(SGLang) feed the fc different permutations.",
        "write the ids sorted and compare the slot tables of two engines with `compare-hidden`",
    ),
    "CAP011": Explanation(
        "An architecture- or version-specific rule decided what the ids capture (SGLang DeepSeek adds +1 only when "
        "ids[0] == 1; GPT-OSS uses ids raw when max(ids) == L).",
        "Informational: the doctor applied the rule; ids written without it in mind capture other layers.",
        "the engine table row cited in the finding names the source file of the rule",
    ),
    "NUM001": Explanation(
        "Each slot is fed the right capture point, but the values differ from the training features beyond bf16 "
        "rounding: another checkpoint revision, dtype, quantisation or chat template.",
        "The draft sees slightly other inputs than in training; the cost ranges from nothing (a dtype gap) to several "
        "points (another revision).",
        "run `acceptance` with training and serving features side by side; the worst positions in `compare-hidden` "
        "show where the values drift",
    ),
    "NUM002": Explanation(
        "Numerically, a training slot best matches another capture point of this target than the one the draft "
        "config declares: the declared recipe is not what produced the training features.",
        "The serving side is configured from a declaration that is wrong, so fixing ids by it serves the wrong layer.",
        "`compare-hidden --train-dump DIR --matrix` prints the best-matching capture point per slot",
    ),
    "NUM003": Explanation(
        "A SpecForge training dump's hidden_state is not the target's final_norm output.",
        "SpecForge computes the target logits the draft is trained to match from hidden_state; a pre-norm state gives "
        "wrong targets, so the draft learned another distribution than the target samples from.",
        "`compare-hidden --train-dump DIR` reports the relative L2 of hidden_state to final_norm",
    ),
    "NUM004": Explanation(
        "A slot of the training dump matches no capture point of this target (relative L2 above the match threshold "
        "for every candidate).",
        "The dump was made with another model, revision or tokenizer: the draft was trained on features this target "
        "never produces.",
        "check the dump's model revision and tokenizer; `compare-hidden --train-dump DIR --matrix` shows the distances",
    ),
    # --- draft checkpoint and config
    "DRF001": Explanation(
        "The draft checkpoint has no lm_head weight.",
        "Loaders warn about unexpected keys, not missing ones: SGLang keeps a random head, so the accept length is "
        "1.00 (sgl#27908).",
        "list the checkpoint's tensors (`eagle3-doctor inspect`); a healthy draft has lm_head.weight [draft_vocab, H]",
    ),
    "DRF002": Explanation(
        "The draft vocabulary is smaller than the target's and the checkpoint has no d2t table mapping draft ids to target ids.",
        "vLLM then maps draft id i to target id i and SGLang builds hot_token_id from a missing table: the draft "
        "proposes the wrong tokens.",
        "`eagle3-doctor inspect` shows draft_vocab_size and whether d2t is present",
    ),
    "DRF003": Explanation(
        "d2t maps draft ids outside the target vocabulary, or holds absolute target ids instead of offsets "
        "(target_id - draft_id).",
        "Engines compute target id = draft id + d2t[draft id]; wrong offsets propose tokens the target never accepts.",
        "`eagle3-doctor inspect` prints the first draft ids that map out of range",
    ),
    "DRF004": Explanation(
        "t2d (the target-vocabulary mask of draft tokens) disagrees with d2t.",
        "SGLang ignores t2d, but training tools that select targets with it trained the draft on another vocabulary "
        "than d2t serves.",
        "`eagle3-doctor inspect` counts the target ids where the two disagree",
    ),
    "DRF005": Explanation(
        "The fc input width is not the number of aux states times the target hidden size.",
        "The engine cannot feed the concatenated features: it refuses the checkpoint, or the draft was trained for "
        "another target.",
        "compare fc.weight's shape with the target's hidden_size in `eagle3-doctor inspect`",
    ),
    "DRF006": Explanation(
        "The draft's lm_head weight statistics look like a fresh initialisation, not a trained head: its top singular "
        "value sits at the i.i.d. edge and its row norms are no more spread than i.i.d. entries give (the same "
        "statistic DRF011 applies to every other module), or it is all zero.",
        "An untrained head proposes near-random tokens: acceptance close to zero.",
        "compare the head's weight statistics with the training checkpoint's",
    ),
    "DRF007": Explanation(
        "The draft ships its own embed_tokens and they differ from the target's.",
        "SGLang always uses the target's embeddings, vLLM keeps the draft's when they differ: the same checkpoint "
        "runs with different embeddings per engine.",
        "`eagle3-doctor inspect` compares the two tables",
    ),
    "DRF008": Explanation(
        "Draft and target hidden or vocabulary sizes disagree.",
        "The draft was trained for another target: its features or token ids do not line up with this one.",
        "compare hidden_size and vocab_size of the two config.json files",
    ),
    "DRF009": Explanation(
        "Draft weights hold NaN or Inf.",
        "One non-finite weight makes every proposal NaN: nothing is accepted.",
        "`eagle3-doctor inspect` names the tensors",
    ),
    "DRF010": Explanation(
        "The draft checkpoint has weights its format does not use.",
        "Loaders drop them with a warning: often a sign that the export renamed tensors (a layer the draft needs "
        "then loads as random).",
        "read the loader warnings of your engine, or the list in `eagle3-doctor inspect`",
    ),
    "DRF011": Explanation(
        "A module of the draft (a decoder layer, its attention or MLP, fc, a norm) still holds its initialisation: "
        "every matrix in it has i.i.d. entries (its top singular value at the i.i.d. edge std*(sqrt(m)+sqrt(n)), its "
        "row norms no more spread than i.i.d. entries give, its std near initializer_range or torch's default "
        "1/sqrt(3*fan_in)), its RMSNorm weights are exactly 1.0 and its biases exactly 0. The usual cause is a "
        "converter whose key map renames the layer (model.layers.0.* vs midlayer.* vs layers.0.*) followed by a "
        "non-strict load: the trained tensors are dropped, the freshly built module is saved, and fc and lm_head, "
        "whose names matched, stay trained.",
        "The draft's one decoder layer is where the features become a prediction: left at init it passes noise to "
        "the head, and acceptance falls to near the floor while every loader reports success.",
        "`eagle3-doctor inspect --json` lists every tensor's statistics under forensics.tensors (trained matrices "
        "of the fixture draft measure spectral ratio 1.27-3.33, fresh inits 0.91-1.04); re-export with a strict "
        "load and compare",
    ),
    "DRF012": Explanation(
        "A dimension config.json states disagrees with what the tensor shapes determine: hidden size (fc rows), "
        "heads x head_dim and KV heads x head_dim (q_proj/k_proj rows), intermediate size (gate_proj rows), the "
        "vocabulary (t2d or embed_tokens rows), the draft vocabulary (lm_head or d2t rows), the target hidden "
        "size (fc width / aux slots) or the number of decoder layers. The fix is the value the shapes imply, at "
        "the key the engine reads; where the shapes leave several readings (heads vs head_dim), the ones "
        "consistent with them are listed.",
        "Engines build the draft from config.json and then load the tensors into it: a mismatch either refuses to "
        "load or, where a loader reshapes or defaults silently, runs attention with the wrong head split.",
        "read the shapes with `safetensors` (or `eagle3-doctor inspect --json`, forensics.geometry) and compare with config.json",
    ),
    "DRF013": Explanation(
        "Two stored tensors hold identical values, or a matrix has rows that are exactly zero: one tensor written "
        "under two names by an export, or rows zeroed by a pruning or padding step.",
        "A duplicated tensor means one of the two modules is not the trained one; zero rows in lm_head are tokens "
        "the draft can never propose.",
        "`eagle3-doctor inspect --json` names the pairs and the rows; compare them with the training checkpoint",
    ),
    "CFG001": Explanation(
        "Configured layer ids are outside the range the engine accepts for this target's depth.",
        "The engine refuses them, crashes, or captures nothing for that slot.",
        "the finding names the valid range for the engine's numbering",
    ),
    "CFG002": Explanation(
        "The layer ids are not in ascending order.",
        "SGLang concatenates in the listed order while vLLM, TensorRT-LLM and ModelOpt sort: the fc input is permuted "
        "in one engine and not in the other.",
        "compare the slot tables of `compare-hidden --engine sglang` and `--engine vllm`",
    ),
    "CFG003": Explanation(
        "rope_theta differs between draft and target.",
        "The draft attends with other rotary frequencies than it was trained with when a converter changed the value.",
        "compare rope_theta in the two config.json files",
    ),
    "CFG004": Explanation(
        "rope_scaling, partial_rotary_factor or max_position_embeddings differ between draft and target (compared on "
        "the inverse frequencies transformers computes).",
        "Converters drop or shorten these; scaled RoPE types then rotate positions differently from training, worst "
        "on long prompts.",
        "compare the RoPE sections of the two config.json files",
    ),
    "CFG005": Explanation(
        "Draft weights and target are stored in different dtypes.",
        "An fp16 draft against a bf16 target overflows and rounds differently from training.",
        "run `acceptance --dtype` with each dtype and compare",
    ),
    "CFG006": Explanation(
        "A forward-changing flag (norm_output, norm_before_residual) means different things in different engines and trainers.",
        "The engine may run the draft with another norm placement than training used.",
        "check how the engine reads the flag (docs/draft-forward.md)",
    ),
    "CFG007": Explanation(
        "The draft config's architecture is not one the engine registers for EAGLE-3.",
        "The engine refuses the draft or loads it as another model class.",
        "the finding lists the architectures the engine registers",
    ),
    "CFG008": Explanation(
        "The draft's config.json (or its eagle_config / transformer_layer_config section) holds keys that no engine "
        "the doctor models reads, and that are not on the list of keys known to leave the forward alone (provenance, "
        "token ids, dropout, the proposal policy). Every key is classified: modelled, known inert, or unknown; only "
        "the unknown ones are listed, so a quiet inspect means every key was checked.",
        "A key the modelled engines ignore may still change the forward in the engine or trainer that wrote it (a "
        "sliding window, a softcap, another activation): if training applied it and serving does not, the draft runs "
        "another function than the one it learned.",
        "`eagle3-doctor inspect --json` lists every key with its class under forensics.keys; look the key up in the "
        "training code and in your engine's draft model",
    ),
    # --- the draft as the engine runs it
    "FWD001": Explanation(
        "The engine runs a forward flag (norm placement: norm_before_fc, fc_norm, norm_before_residual, norm_output, "
        "the norm before lm_head) differently from how the draft was trained, e.g. the flag sits in a key this engine "
        "never reads.",
        "The draft's forward differs from training at every step: its hidden states and logits move off what it learned.",
        "`eagle3-doctor inspect` lists the flags the engine runs; `acceptance` runs the draft the engine's way",
    ),
    "FWD002": Explanation(
        "It is not pinned to a source whether this engine version applies a flag the draft was trained with.",
        "If it does not, the forward differs from training as in FWD001.",
        "check the engine's logs or code for the flag, or name a modelled version with --engine-version",
    ),
    "FWD003": Explanation(
        "The engine replaces the draft's own lm_head or embed_tokens with the target's.",
        "The draft was trained with its own tables; the target's differ, so proposals change.",
        "`eagle3-doctor inspect` compares the tables; an engine release with the fix keeps the draft's",
    ),
    "FWD004": Explanation(
        "tie_word_embeddings: true makes the engine use embed_tokens as the draft's lm_head.",
        "The trained lm_head is ignored: the draft proposes from its embedding table.",
        "look for tie_word_embeddings in the draft's config.json",
    ),
    "FWD005": Explanation(
        "The draft has both norm_before_fc and fc_norm, a pair speculators rejects as mutually exclusive.",
        "Engines that accept the pair may apply them in another order than training.",
        "check which of the two the training run used",
    ),
    "FWD006": Explanation(
        "The engine applies RoPE in another layout than the draft was trained with: NeoX (rotate-half) versus "
        "GPT-J-interleaved pairs, decided by rope_is_neox_style or the engine's own default for the architecture.",
        "Each q/k pair is rotated by another frequency than in training, so attention loses its positions: "
        "TensorRT-LLM PR #19036 reports an acceptance length of 1.01.",
        "`eagle3-doctor inspect` names the layout each side uses and where it was read",
    ),
    "FWD007": Explanation(
        "Nothing says which RoPE layout the draft was trained with (a Llama 4 target rotates GPT-J-interleaved pairs "
        "while SpecForge and speculators train NeoX) and the draft config names none.",
        "If training and the engine disagree, acceptance collapses as in FWD006.",
        "`eagle3-doctor acceptance` runs the draft under both layouts and names the one its weights fit; or ask the "
        "training run which layout it used and write rope_is_neox_style into the draft's config.json",
    ),
    "FWD009": Explanation(
        "A draft with more than one decoder layer: each layer after the first applies a norm before its attention. "
        "speculators trains it as the verifier's own decoder layer (layers.N.input_layernorm) and vLLM applies that "
        "weight; SGLang from 0.5.12 applies layers.N.hidden_norm instead, which a speculators checkpoint does not hold, "
        "so the engine keeps its initial weight of 1.0 and leaves the trained input_layernorm unused.",
        "The later layers' attention reads a state scaled differently from training at every step.",
        "`eagle3-doctor inspect` names the norm each engine release applies (executed from its llama_eagle3.py); "
        "`acceptance` measures the draft that way (the as_served column)",
    ),
    "FWD010": Explanation(
        "The engine release does not run every decoder layer of a multi-layer draft: it refuses the config at "
        "start-up (SGLang before 0.5.12: 'EAGLE3 currently only supports 1 layer') or builds one layer and has no "
        "parameters for the rest (vLLM before 0.11.1).",
        "The server does not start, or runs a draft cut to its first layer, which is not the function it learned.",
        "`eagle3-doctor inspect` shows what the release's own draft model builds for num_hidden_layers = 2 "
        "(executed by conformance/draft_exec.py); upgrade to the release it names",
    ),
    "FWD008": Explanation(
        "The draft's attention was trained with Qwen3's q_norm/k_norm (speculators drafts with a Qwen3 layer when "
        "transformer_layer_config.model_type is qwen3) and the engine runs it without them: SGLang's "
        "LlamaForCausalLMEagle3 has no such norms and skips their weights silently; vLLM registers a Qwen3 EAGLE-3 "
        "draft only from 0.33.",
        "Every query and key reaches RoPE and the dot product at another scale than in training.",
        "`eagle3-doctor inspect` names the layer config and weights; `acceptance` measures the draft with and "
        "without the norms (the as_served column)",
    ),
    # --- quantization
    "QNT001": Explanation(
        "SGLang builds the draft model with --speculative-draft-model-quantization, which defaults to the server's "
        "--quantization (server_args.py; ModelConfig.from_server_args): a target launched with --quantization fp8 "
        "or modelopt_fp4 builds a 16-bit draft with that method too, and a quantized draft with the target's method "
        "instead of its own.",
        "A draft quantized online runs in another precision than it was trained in; a method that loads stored "
        "scales finds none in a 16-bit draft and the server fails to start.",
        "`eagle3-doctor inspect --engine sglang` names the target's scheme; the server log prints the draft's "
        "quantization; `--speculative-draft-model-quantization unquant` keeps the draft as trained",
    ),
    "QNT002": Explanation(
        "The draft's config.json names a quantization_config while every stored tensor is 16-bit, or the checkpoint "
        "stores scales, packed or 8-bit tensors while config.json names no quantization_config.",
        "Engines build the draft's layers from the config: quantized layers expect the scales the checkpoint lacks, "
        "or 16-bit layers receive quantized bytes and scale tensors they do not know.",
        "`eagle3-doctor inspect` lists the tensors (names, dtypes) and the config key",
    ),
    "QNT003": Explanation(
        "The target's config names a weight quantization (fp8, compressed-tensors, ModelOpt FP8/NVFP4, AWQ, GPTQ). "
        "EAGLE-3 drafts are trained on the hidden states of a bf16 target unless they were trained on the quantized one.",
        "Quantized layers produce slightly different hidden states; the draft is fed features it was not trained "
        "on and accepts fewer tokens, most where the quantization error is largest.",
        "run `eagle3-doctor compare-hidden` and `acceptance` with the bf16 target and with the quantized one on the "
        "same prompts: the difference is the cost of the quantization to the draft",
    ),
    "QNT004": Explanation(
        "The engine builds the draft with the draft's own quantization (its config.json, or the option that names "
        "the draft's method), not the target's: vLLM's draft ModelConfig and llama_eagle3.py get_draft_quant_config, "
        "TensorRT-LLM's one-model EAGLE-3 draft ModelConfig read from the draft's directory.",
        "A 16-bit draft stays 16-bit under a quantized target: no precision change from the engine itself.",
        "the finding names the engine file and function read",
    ),
    "QNT005": Explanation(
        "No rule for this engine says whether it builds the draft with the target's quantization or its own.",
        "If it applies the target's scheme, the draft runs in another precision than trained or fails to load.",
        "read the file the finding names, or measure acceptance as served",
    ),
    # --- acceptance
    "ACC001": Explanation(
        "Replayed through the target, the draft's step-1 accuracy under the features the engine feeds is far below "
        "its accuracy under the features it was trained on.",
        "This is the measured cost of a capture mismatch: the fix of the CAP finding removes it.",
        "`eagle3-doctor acceptance` prints both paths side by side with intervals over prompts",
    ),
    "ACC002": Explanation(
        "Step-1 accuracy is low even on the training features.",
        "The wiring is not the (only) problem: the draft itself is weak or broken (lm_head, d2t, embeddings, chat "
        "template, another target).",
        "run `eagle3-doctor inspect` and `template-diff`",
    ),
    "ACC003": Explanation(
        "A measured acceptance figure is below a threshold you set (--min-accept-rate, --min-tau, the gate's policy).",
        "It states the threshold, not a cause: the other findings name the cause.",
        "rerun with more prompts if the interval is wide",
    ),
    "ACC004": Explanation(
        "A scan over capture-point triples found features that fit the draft better than the configured ones: "
        "the paired 95% interval over prompts of the step-1 accuracy difference lies above 0, on at least 5 prompts "
        "(with fewer, or an interval reaching 0, the scan table shows the gap and no finding is made). Candidates "
        "the prompts cannot separate from the best one are listed with it.",
        "The draft was probably trained on those points: the declared training recipe is wrong.",
        "`eagle3-doctor fingerprint` ranks candidates from the draft's weights",
    ),
    "GATE001": Explanation(
        "A metric regressed against the baseline gate JSON beyond the allowed margin.",
        "The new checkpoint accepts fewer tokens than the old one on the same prompts.",
        "compare the two training runs; the finding states how the drop was decided",
    ),
    # --- serving evidence
    "SRV001": Explanation(
        "The live server accepts well below the doctor's prediction for its own capture points.",
        "The wiring and the draft predict more: the engine's runtime (CUDA graphs, batching, kernels) loses acceptance.",
        "rerun the workload eagerly (vLLM --enforce-eager, SGLang --disable-cuda-graph) and one request at a time",
    ),
    "SRV002": Explanation(
        "The server's acceptance matches the prediction under the serving features, and the training features "
        "would give clearly more.",
        "The capture mismatch explains the gap between training and serving.",
        "`compare-hidden` names the ids to write",
    ),
    "SRV003": Explanation(
        "The server matches the prediction and the draft is weak even on its training features.",
        "Neither wiring nor engine: the draft itself needs work.",
        "`inspect` and `template-diff` check the draft and the data",
    ),
    "SRV004": Explanation(
        "The server's figures and the prediction neither separate nor agree (or the server measures more).",
        "No verdict is supported by the data; the workloads probably differ.",
        "replay the server's own prompts with its settings and scrape before and after exactly that workload",
    ),
    "SRV010": Explanation(
        "A slot of the engine's own dump matches no slot of the training dump and is not the embeddings.",
        "The engine captures other layers (or another model) than training did.",
        "`compare-hidden --target ... --matrix` names the capture points",
    ),
    # --- the CI gate's evidence
    "GATE002": Explanation(
        "The gate's only training-side truth is the config the engine reads, so training and serving agree by construction.",
        "A wrong id in that config is invisible to the gate: it would pass a mis-wired draft.",
        "name the training side in the policy's [training] table, or pass --train-recipe / --train-dump",
    ),
    "FPR001": Explanation(
        "The draft's own weights fit other capture points better than those the engine feeds (a paired difference "
        "over prompts, excluding zero).",
        "The draft was trained on other layers than the engine serves.",
        "`eagle3-doctor fingerprint` ranks the candidates with intervals",
    ),
    "FPR002": Explanation(
        "The draft's weights fit other capture points better than the declared training side.",
        "The training record (recipe, ids, config) disagrees with the checkpoint: one of them is wrong.",
        "`eagle3-doctor fingerprint`",
    ),
    "FPR003": Explanation(
        "The fingerprint cannot tell the candidate capture points apart (ties within noise, or no better than chance).",
        "Nothing is concluded from it.",
        "replay more prompts or tokens",
    ),
    # --- engine failures
    "ENG001": Explanation(
        "The engine refuses to start with this target, draft config or ids (its own error, from the engine table "
        "that executes the engines' code).",
        "No draft runs at all.",
        "the finding cites the engine file that raises",
    ),
    "ENG002": Explanation(
        "The engine starts but crashes on the first forward with these ids: its own capture code fails, or the ids "
        "capture fewer states than the draft's fc takes (an id the engine's rule maps past the last layer, a repeated "
        "layer, an empty list), so the fc matmul or the unpacking of the captured states fails.",
        "No draft runs at all.",
        "the finding cites the engine file that raises",
    ),
    "ENG003": Explanation(
        "The engine runs, but a slot it feeds the draft is no residual-stream capture point: a layer's MLP branch "
        "instead of hidden_states + residual, a slot the engine never writes (an id past the last layer), or, when "
        "ids capture fewer states than the draft's fc takes, a single state SGLang hands the decoder layer without "
        "the fc (srt/models/llama_eagle3.py applies fc only when the width differs from the draft's hidden size).",
        "The draft gets a tensor it was never trained on in that slot, with no error anywhere.",
        "the finding cites the engine file that captures the wrong tensor (engine table, executed by make conformance)",
    ),
    "ENG004": Explanation(
        "SGLang and vLLM decide what each layer id captures in the target's own model file (the setter and the "
        "decoder loop of that class), and the engine table holds those files executed for a list of families. "
        "This target's family is not on that list, so what the engine feeds the draft is not predicted: the "
        "doctor does not fall back to another family's rule, because families differ exactly there (+1 or raw "
        "ids, an index check that raises, a capture at the end of the stack).",
        "Nothing is claimed about the serving side: a mismatch there would go unreported, and so would a start-up failure.",
        "measure what the engine really feeds: dump its aux hidden states and run `compare-hidden --engine-dump` "
        "(docs/serving-evidence.md); or add the family to conformance/ and run `make conformance`",
    ),
    "ENG005": Explanation(
        "The --engine-version is newer than the newest release the engine table models (executed by make conformance "
        "for SGLang, vLLM and ModelOpt; hand-read for TensorRT-LLM), but inside the next minor series, so the doctor "
        "applies the newest modelled release's capture rules, id keys and draft forward to it. A release can change "
        "any of them: which key is read, the +1 rule, the capture loop.",
        "Every other finding about capture points holds only if the release kept those rules.",
        "add the release to conformance/releases.py and run make conformance (commit conformance/table.json), or pin "
        "--engine-version to the modelled release your build runs",
    ),
    "CMD001": Explanation(
        "The launch command passes --speculative-token-map, FR-Spec's list of frequent ('hot') token ids. SGLang "
        "loads it for EAGLE (v2) drafts as the draft's vocabulary: the draft head scores only those ids, in the "
        "file's order, and the draft config's hot_vocab_size is overridden with the list's length. For EAGLE3 drafts "
        "SGLang ignores the file with a warning: the draft's own d2t table is the vocabulary.",
        "A token outside the map is never drafted, so every position where the target continues with one is a "
        "rejection; a map built from other traffic than the one served leaves out the tokens that traffic needs. For "
        "EAGLE3 nothing changes, but the user believes a vocabulary is applied that is not.",
        "grep the server log for 'Ignoring the specified token map'; count how many target tokens of your prompts' "
        "greedy continuations are in the map",
    ),
    "CMD002": Explanation(
        "SGLANG_ENABLE_SPEC_V2 (in the command's environment) asks for SGLang's overlapped speculative worker, which "
        "drafts a chain: topk 1. With --speculative-eagle-topk above 1, the releases that read the variable turn the "
        "overlap scheduler off and run spec v1 instead (a warning at startup), and hybrid Mamba/GDN targets fail "
        "with 'Spec v2 currently only supports topk = 1'.",
        "The server runs another worker than the one the command asks for: the tree and its acceptance are spec "
        "v1's, and the overlap speedup the variable was set for is not there.",
        "grep the server log for 'Spec v1 is used'; measure both shapes with `eagle3-doctor speedup`",
    ),
    "DGN001": Explanation(
        "`diagnose` measured acceptance with each difference between serving and training (a lever: the capture "
        "points the engine feeds, the draft forward as the engine runs it) set back to the training side, one at a "
        "time, on the same prompts. Setting this lever back recovers acceptance, with a paired interval over prompts "
        "that excludes zero.",
        "The draft is fed or run differently from training; the lever's own finding (CAP, FWD) says exactly how.",
        "the lever table of `eagle3-doctor diagnose` (recovery per lever, paired interval); `eagle3-doctor fix` "
        "writes the corrected copy and re-measures it",
    ),
    "DGN002": Explanation(
        "The module's output was replaced by its mean over the batch's positions (mean-ablation) on the training-side "
        "features, and step-1 accuracy did not fall: a trained module always carries information its mean does not.",
        "A module that contributes nothing was most likely saved at initialisation (a non-strict load under a renamed "
        "key), converted in another layout, or taken from another checkpoint; the draft runs, but badly.",
        "`eagle3-doctor inspect` examines the module's tensors for the signatures of initialisation; the module "
        "table of `diagnose` shows what every module's ablation costs",
    ),
    "DGN003": Explanation(
        "Step-1 accuracy, measured per prompt in buckets of absolute position, falls past this position by more "
        "than 0.15, and the paired interval over the prompts that reach past it excludes no fall.",
        "Drafts are trained on sequences of a fixed maximum length (SpecForge, speculators: --max-length); past it "
        "their attention and RoPE positions are untrained, and long multi-turn contexts accept less.",
        "the context table of `eagle3-doctor diagnose`; rerun with shorter prompts (--max-tokens)",
    ),
    "DGN004": Explanation(
        "Acceptance is low even with every lever on the training side, every module of the draft costs accuracy "
        "when ablated, and accuracy does not fall along the context. The measurements cannot place the gap.",
        "Left: the draft was trained for another target or revision, on other data, or with another template.",
        "a training dump (`compare-hidden --train-dump`, `acceptance --train-dump`), `template-diff` with the "
        "training template, and `fingerprint` decide between them",
    ),
    "DGN005": Explanation(
        "Offline, as the engine feeds and runs it, the draft accepts as it did in training: no lever recovers "
        "anything, every module is trained, and the context does not matter.",
        "A gap that shows only on the live server comes from the engine's runtime (CUDA graphs, batching, "
        "a scheduler or kernel bug), which an offline replay cannot see.",
        "`eagle3-doctor server-metrics` with the server's /metrics and log",
    ),
    "DGN006": Explanation(
        "Some prompts hold chat markup of another model family (ChatML's <|im_start|>, Llama 3's headers, [INST], "
        "Gemma's turns) inside a message's text, typically a rendered conversation pasted into one user turn.",
        "The server wraps that text in the target's own template: the draft reads tags as words it was never "
        "trained on, and the target's continuation follows a layout neither was trained for.",
        "the prompt numbers in the finding; `eagle3-doctor template-diff` shows how the server renders them",
    ),
    "FIX001": Explanation(
        "`eagle3-doctor fix` wrote a copy of the draft with every config edit the findings carry (the same edits "
        "the terminal prints as fixes), then measured acceptance on the original and on the copy on the same "
        "prompts: the copy accepts more, with a paired interval over prompts above zero.",
        "Nothing is wrong any more with what the edits touched; serve the copy.",
        "`eagle3-doctor diagnose` on the copy: its verdict should be DGN005",
    ),
    "FIX002": Explanation(
        "Either no finding's fix is an edit of the draft's config.json (the cause is the checkpoint, the data or "
        "the launch command), or the copy with the edits applied does not accept more than the original "
        "(the paired interval of the change reaches zero).",
        "The edits were not the cause, or not all of it; a fix is reported as done only when it is measured.",
        "`eagle3-doctor diagnose` on the copy",
    ),
    "FIX003": Explanation(
        "`eagle3-doctor fix` ran the diagnosis first, and it found nothing at warning or error: no copy is written.",
        "Offline the draft accepts as it did in training; a gap on the live server is the engine's runtime.",
        "`eagle3-doctor server-metrics`",
    ),
    # --- prompt format
    "TPL001": Explanation(
        "The serving chat template renders role tags or the turn layout differently from the training template.",
        "The draft was trained on features of other tokens than it sees in serving, and the tokens it must predict "
        "follow another layout.",
        "`eagle3-doctor template-diff` prints the first differing tokens",
    ),
    "TPL002": Explanation(
        "BOS handling differs: a BOS missing on one side, or two (the template's plus the tokenizer's).",
        "Every position is shifted by one token relative to training.",
        "`template-diff` shows the first tokens of both renderings",
    ),
    "TPL003": Explanation(
        "A system prompt is present on one side only (e.g. the training recipe inserted one).",
        "The context the draft conditions on differs from training.",
        "`template-diff` shows the system section",
    ),
    "TPL004": Explanation(
        "The generation prompt (the assistant header the draft continues from) differs.",
        "The draft's first proposals follow another prefix than in training.",
        "`template-diff` shows the end of both renderings",
    ),
    "TPL005": Explanation(
        "Training and serving renderings differ only in whitespace.",
        "Usually small, but whitespace tokens shift positions and change the features.",
        "`template-diff`, then `acceptance` to measure it",
    ),
    "TPL006": Explanation(
        "The thinking section is rendered on one side only (enable_thinking or template kwargs differ).",
        "The draft predicts inside a section it never saw in training, or misses one it did.",
        "`template-diff` with --train-template-kwargs / --serve-template-kwargs",
    ),
    "TPL007": Explanation(
        "The tool section differs between training and serving.",
        "Tool-calling prompts carry other tokens than in training.",
        "`template-diff` on requests with tools",
    ),
    "TPL008": Explanation(
        "Acceptance is significantly lower with prompts rendered the serving way than the training way "
        "(a paired bootstrap interval over prompts below zero).",
        "The measured cost of the template differences above.",
        "`acceptance` with --train-template / --serve-template prints the table",
    ),
    "TPL009": Explanation(
        "The draft was trained with another tokenizer (vocabulary) than the target's.",
        "Token ids mean different tokens: the draft's proposals and features do not line up.",
        "`template-diff --train-tokenizer DIR` compares vocabulary hashes",
    ),
    "TPL010": Explanation(
        "Special tokens, added tokens or BOS/EOS handling differ between the training tokenizer and the target's.",
        "Prompts tokenize differently at the special tokens.",
        "`template-diff --train-tokenizer DIR`",
    ),
    "TPL011": Explanation(
        "The training loss mask does not match what serving drafts for: it misses the assistant replies, or also "
        "trains on other roles.",
        "The draft learned to predict other tokens than it proposes in serving.",
        "`template-diff --train-data FILE` counts trained tokens by role",
    ),
}


def closest_codes(text: str, n: int = 3) -> list[str]:
    """The registered codes nearest to a mistyped one: the same family and number first, then by spelling."""
    import difflib
    import re

    from .findings import CODES

    t = text.strip().upper()
    m = re.fullmatch(r"([A-Z]+)0*([0-9]*)", t)
    near: list[str] = []
    if m:
        letters, digits = m.groups()
        if digits and f"{letters}{digits.zfill(3)}" in CODES:  # cap2 -> CAP002
            near.append(f"{letters}{digits.zfill(3)}")
        elif not digits:  # a family alone: its first codes
            near += [c for c in CODES if re.fullmatch(f"{letters}[0-9]+", c)][:n]
    near += [c for c in difflib.get_close_matches(t, list(CODES), n=n, cutoff=0.5) if c not in near]
    return near[:n]


def list_codes() -> str:
    """Every finding code on one line (code, severity, meaning): what `explain` with no code prints, so
    a user can find the code to ask about."""
    from .findings import CODES

    width = max(map(len, CODES))
    return "".join(f"{c:<{width}}  {sev:<7}  {title}\n" for c, (sev, title) in CODES.items())


def explain(code: str) -> str:
    """The long form of a finding code as text; BadInput naming the closest codes for an unknown one."""
    from .errors import BadInput
    from .findings import CODES

    c = code.strip().upper()
    if c not in CODES:
        near = closest_codes(code)
        raise BadInput(
            f"unknown finding code {code!r}",
            (f"did you mean {', '.join(near)}? " if near else "") + "every code is listed in docs/findings.md",
        )
    sev, title = CODES[c]
    e = EXPLANATIONS[c]

    def para(head: str, text: str) -> str:
        return head + "\n" + textwrap.fill(text, width=100, initial_indent="  ", subsequent_indent="  ") + "\n"

    return "\n".join(
        [
            f"{c} ({sev}): {title}\n",
            para("What it means", e.meaning),
            para("Why acceptance drops", e.why),
            para("How to confirm", e.confirm),
        ]
    )
