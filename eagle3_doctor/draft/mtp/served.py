"""How each engine serves an MTP head: which target state step 1 receives, and what steps 2..K receive.

Read (not executed: neither engine runs on this machine), file at a commit:

- vLLM, step 1: ``v1/worker/gpu_model_runner.py`` ``propose_draft_token_ids`` passes
  ``target_hidden_states = hidden_states[:num_scheduled_tokens]`` (the aux list only for EAGLE-3), and
  ``hidden_states`` is the target forward's output, which ``model_executor/models/deepseek_v2.py``
  @002d607 ``DeepseekV2Model.forward`` ends with ``hidden_states, _ = self.norm(hidden_states, residual)``:
  post-norm, ``final_norm``. (Read for the DeepSeek-V2/V3 family; Llama and Qwen end their forward the
  same way, not re-read here.)
- vLLM, steps 2..K: ``model_executor/models/deepseek_mtp.py`` @03356f8
  ``DeepSeekMultiTokenPredictorLayer.forward`` returns ``residual + hidden_states`` (pre-norm); the norm is
  applied in ``compute_logits`` only: recycled ``pre_norm``. The same layer zeroes the embedding at position
  0 (``inputs_embeds[positions == 0] = 0``), a detail the doctor does not model.
- SGLang, step 1: ``srt/models/deepseek_nextn.py`` @0114f9c feeds ``hnorm(forward_batch.spec_info.hidden_states)``,
  the target's logits-processor input (post-norm); that last link was not traced line by line here.
- SGLang, steps 2..K: the same file returns ``shared_head.norm(hidden_states, residual)``: ``post_norm``.
- speculators-format heads (``MTPDraftModel``): which engine class serves them, and so their recycling, was
  not read: undetermined, said as such.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.taps import CapturePoint, final_norm


@dataclass(frozen=True)
class MTPServing:
    engine: str
    hidden: CapturePoint  # what step 1 receives
    hidden_source: str
    recycle: str | None  # "pre_norm" | "post_norm" | None (undetermined)
    recycle_source: str


_VLLM_HIDDEN = (
    "vllm v1/worker/gpu_model_runner.py propose_draft_token_ids (target_hidden_states = hidden_states, the "
    "target forward's output) and model_executor/models/deepseek_v2.py @002d607 DeepseekV2Model.forward "
    "(ends in self.norm): post-norm"
)
_SGL_HIDDEN = (
    "sglang srt/models/deepseek_nextn.py @0114f9c: hnorm(spec_info.hidden_states), the target's normed "
    "logits-processor input (that link not traced line by line)"
)


def mtp_serving(engine: str, fmt: str) -> MTPServing:
    """The served side for an engine and checkpoint layout. One commit of each engine was read, so releases
    are not told apart here: a release that changed either choice (the issue tracker reports vLLM skipping
    shared_head.norm in recycling, #45895) is not modelled, and the sources name the commit read."""
    if engine == "vllm":
        if fmt == "deepseek":
            rec, why = "pre_norm", "vllm model_executor/models/deepseek_mtp.py @03356f8: forward returns residual + hidden_states"
        else:
            rec, why = None, "not read: the vLLM class that serves a speculators MTPDraftModel"
        return MTPServing("vllm", final_norm(), _VLLM_HIDDEN, rec, why)
    if fmt == "deepseek":
        rec, why = "post_norm", "sglang srt/models/deepseek_nextn.py @0114f9c: forward returns shared_head.norm(...)"
    else:
        rec, why = None, "not read: the SGLang class that serves a speculators MTPDraftModel"
    return MTPServing(engine, final_norm(), _SGL_HIDDEN if engine == "sglang" else f"{engine}: not read", rec, why)
