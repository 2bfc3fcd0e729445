"""Prompt format on both sides: what the draft was trained on vs what the server renders.

Inputs
- training data as the recipes store it: OpenAI ``messages`` JSONL, ShareGPT ``conversations``
  with ``from``/``value`` (speculators' and most public sets), SpecForge's ``conversations`` with
  ``role``/``content``, and already-tokenized rows with ``input_ids`` / ``loss_mask``;
- serving requests as OpenAI chat-completions JSON (one object, an array, or JSONL), with the
  ``tools``, ``chat_template_kwargs`` and ``add_generation_prompt`` fields vLLM and SGLang read;
- a chat template on each side: the target's own (``target``), a Jinja file (what SGLang's and
  vLLM's ``--chat-template`` take), a tokenizer_config.json, or a tokenizer directory.

Rendering always goes through transformers' ``apply_chat_template`` (Jinja): the tool never
re-implements a template. Both sides are tokenized with ``add_special_tokens=False`` unless told
otherwise, as vLLM's chat endpoint (``ChatCompletionRequest.add_special_tokens`` defaults to False)
and SpecForge's ``GeneralParser.parse`` (specforge/data/parse.py) both do.
"""
