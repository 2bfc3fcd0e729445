"""The target over a static KV cache, each forward shape captured once as a CUDA graph on a GPU.

Why: an eager Hugging Face decode step is bound by the host (tens of Python calls and kernel launches
per layer), not by the weights it reads: on an H200 an 8B-shaped decode step took 20-100 ms where
reading its weights takes 3.7 ms (bench/RESULTS.md). A CUDA graph replays the step's kernels with no
host work, and a static cache gives it fixed addresses, which is what engines serve with and what
gpt-fast's loop does. Nothing here changes the arithmetic: the same modules run with the same inputs;
on the CPU (no graphs) the tests pin the tokens to ``generate``'s.

What the path relies on is checked, not assumed (:func:`static_cache`): transformers' static layers
that count their own length on the device (``cumulative_length``, 5.x), no sliding or linear-attention
layers, and an attention implementation that takes a 4D additive mask (sdpa, eager). The mask is ours,
built on the device from a slot counter: the model's own mask builder takes host decisions
(``.all()`` checks) that a graph capture cannot hold. Anything else keeps transformers' ``generate``. On a GPU the
native cache's steps take no mask at all: each row's slots are given as bounds on the device
(:mod:`.native.spans`), so one graph per query count serves every length of a continuation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch

from ..core.graphs import Graphs, slots
from ..core.taps import CapturePoint, TapRecorder

if TYPE_CHECKING:
    from .target import Target


class Sink(Protocol):
    """Where a forward's taps [b, n, H] go: the slot of their first position, and the batch rows they are (None:
    every row, in order)."""

    def __call__(self, at: int, taps: dict[CapturePoint, torch.Tensor], rows: list[int] | None = None) -> None: ...


class Recorder(Protocol):
    """Where a continuation batch's taps go (:class:`model.recorded.Recorder`): opened before the prefill with the
    rows' pads, the cache's slots and the slot the prompts end at, then handed each forward's taps (a :class:`Sink`)."""

    points: frozenset[CapturePoint]

    def open(self, pads: Sequence[int], length: int, prompt: int) -> None: ...

    def write(self, at: int, taps: dict[CapturePoint, torch.Tensor], rows: list[int] | None = None) -> None: ...


MASKS_TAKEN = ("sdpa", "eager")


def device_memory(device: torch.device) -> int:
    """The bytes the device holds in all: a GPU's memory, else the host's physical memory."""
    import os

    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


# the share of the free memory a continuation batch's cache, prefill and recorded taps may take: the rest covers what
# the sizing does not count (a step's logits and activations, the CUDA graphs' pools, the allocator's fragments). At
# 0.6 a diagnose at 512 x 512, whose recording of every candidate wiring's taps took 23% of the memory, ran in two
# batches with 40 GB of the GPU never used (bench/RESULTS.md, 2026-12-03)
DECODE_SHARE = 0.75


def free_memory(device: torch.device) -> int:
    """The bytes this process could still allocate on ``device``: a GPU's free memory plus the blocks the allocator
    holds that no tensor uses (free to this process, though not to the driver); the host's memory on the CPU."""
    if device.type != "cuda":
        return device_memory(device)
    free, _total = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def _text_config(target: Target) -> dict[str, Any]:
    """The language model's config: a multimodal checkpoint nests it under ``text_config``."""
    text = target.config.get("text_config")
    return text if isinstance(text, dict) else target.config


def kv_bytes_per_token(target: Target) -> int:
    """The KV cache's bytes per sequence and position, from the target's config: keys and values of every layer."""
    c = _text_config(target)
    heads = c.get("num_attention_heads") or 1
    kv = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or (c.get("hidden_size") or 0) // heads
    layers = c.get("num_hidden_layers") or 0
    return int(2 * layers * kv * head_dim * torch.empty((), dtype=target.dtype).element_size())


def decode_batch_size(
    target: Target, prompt_len: int, max_len: int, *, reserve: int = 0, taps_per_token: int = 0, cap: int = 1024
) -> int:
    """Sequences per greedy continuation batch on a GPU: as many as :data:`DECODE_SHARE` of the free memory, less
    ``reserve`` bytes held beside the batch (the taps recorded for the replay), holds a static cache of ``max_len``
    positions for, beside one eager prefill of ``prompt_len`` tokens each and the last row's float32 logits. A decode
    step reads every weight once whatever the batch, so the continuation's cost falls with each doubling until the KV
    cache's reads dominate: a forward-sized batch (model.runtime.auto_batch_size, capped at 64) ran 512 x 512 as 8
    batches where one fits (bench/RESULTS.md). 8 on the CPU, where a step's arithmetic, not the weights' reads, is
    the cost.

    The prefill's transient is (12 H + 6 I) elements a token plus the recorded taps twice (``taps_per_token``
    bytes; their reordered copy): a 4 x 32k prefill on an 8B shape held 56.5 GB above its start, 431 KB a token,
    where the layer's activations alone, (4 H + 2 I), would have counted 90 KB (bench/RESULTS.md, 2026-12-03). The
    native decoder's prefill holds one group's (:func:`prefill_groups`), whatever the batch: long prompts take
    sequences a batch by their caches alone."""
    if torch.device(target.device).type != "cuda":
        return 8
    if target.capture_device is not None:  # sharded by a device map: no one device's free memory decides
        from .runtime import auto_batch_size

        return auto_batch_size(target, max_len)
    free = free_memory(torch.device(target.device))
    c = _text_config(target)
    H = int(c.get("hidden_size") or 4096)
    inter = int(c.get("intermediate_size") or 4 * H)
    vocab = int(c.get("vocab_size") or 0)
    elt = torch.empty((), dtype=target.dtype).element_size()
    act, prompt = (12 * H + 6 * inter) * elt, max(prompt_len, 1)
    kv = kv_bytes_per_token(target) * slots(max_len) + 4 * vocab
    if getattr(getattr(target, "model", None), "native", False):
        # the native prefill runs a group of at most GROUP_MAX_TOKENS tokens a forward (a longer prompt alone): its
        # activations and the group's reordered taps are one group's, each group's written straight into the
        # recording (``reserve``)
        transient = (act + taps_per_token) * max(GROUP_MAX_TOKENS, prompt)
        per_seq = kv
    else:  # transformers' static cache: one forward over every row
        transient, per_seq = 0, kv + (act + 2 * taps_per_token) * prompt
    return max(1, min(cap, int((free * DECODE_SHARE - reserve - transient) // per_seq)))


def check_cache_fits(target: Target, batch: int, max_len: int) -> None:
    """A KV cache of ``batch`` rows and ``max_len`` positions, sized from the target's config (keys and values of
    every layer), fits in the memory of the device it goes on: otherwise one ResourceError naming the sizes,
    rather than the allocator's failure, which reads as a bug."""
    from ..core.errors import ResourceError

    per_token = kv_bytes_per_token(target)
    need, have = per_token * batch * max_len, device_memory(torch.device(target.device))
    if need > have:
        raise ResourceError(
            f"a KV cache of {batch} sequences x {max_len} positions needs {need / 2**30:,.0f} GiB, over the "
            f"{have / 2**30:,.0f} GiB the {torch.device(target.device).type} has",
            "lower the batch size or the context (--batch-sizes, --batch-size, --context)",
        )


def static_cache(target: Target, batch: int, max_len: int) -> Any | None:
    """A transformers static cache for ``batch`` rows of ``max_len`` slots, or None where this path would
    not hold (older transformers, sliding-window or linear-attention layers, another attention kernel); refused
    in one line where it cannot fit (check_cache_fits)."""
    check_cache_fits(target, batch, max_len)
    if getattr(target.model, "native", False):  # the native decoder's own cache keeps this contract
        return target.model.new_static_cache(batch, max_len)
    cfg = target.model.config
    if getattr(cfg, "_attn_implementation", "eager") not in MASKS_TAKEN:
        return None
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    kinds = set(getattr(text, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"} or getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return None
    try:
        from transformers import StaticCache

        cache = StaticCache(config=cfg, max_cache_len=max_len)
    except (ImportError, TypeError, ValueError):
        return None
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "cumulative_length") and not layer.is_sliding for layer in layers):
        return None
    return cache


class StaticDecoder:
    """B rows advancing together over one static cache: a prefill, then forwards of n new tokens each.

    Rows are left-padded (prompts end at the same slot, generation appends at the right); ``pad[b]``
    slots of row b are masked out of every query and its positions start at its first real token, as
    ``generate`` numbers them. ``forward`` returns the target's argmax at every new position and the
    taps asked for there; on CUDA each (n) shape is captured as a graph at its first use.
    """

    def __init__(self, target: Target, cache: Any, batch: int, max_len: int, points: Iterable[CapturePoint] = ()):
        self.target, self.cache, self.max_len = target, cache, max_len
        self.points = tuple(points)
        dev = target.device
        self.dev = dev
        self.slot = torch.zeros((), dtype=torch.long, device=dev)  # the next slot to write (every row alike)
        self.pad = torch.zeros(batch, dtype=torch.long, device=dev)
        self.length = 0  # the host's copy of slot, kept in step without a sync
        self.head = target.model.get_output_embeddings()
        self._base = target.parts.base
        self._kw = cache_keyword(self._base)
        self._dtype = target.model.get_input_embeddings().weight.dtype
        self._graphs = Graphs(dev, lambda: self.length, self._set_length)

    @property
    def graphed(self) -> bool:
        return self._graphs.on

    def close(self) -> None:
        """Let the cache and the graphs go now. The graphs' length callbacks refer back to this decoder, a cycle
        that only the garbage collector breaks: a continuation's cache (tens of GB for a large batch) outlived
        its batch, and the next batch, or the replay after it, ran out of memory (bench/RESULTS.md)."""
        self._graphs.clear()
        self.cache = None

    def _window(self, end: int) -> int:
        """The slots a masked forward ending at slot ``end`` attends over: all of them where the cache cannot read fewer
        (transformers' static layers), else ``end`` rounded up to a step of 256 slots, or an eighth of ``end``
        past 2,048, so a few graphs cover a continuation and no step reads more than ~12% of slots unwritten."""
        if not hasattr(self.cache, "set_window"):
            return self.max_len
        step = max(256, 1 << max(0, end.bit_length() - 4))
        return min(self.max_len, -(-end // step) * step)

    def _mask(self, n: int, window: int) -> torch.Tensor:
        """[B, 1, n, W] additive: query i (slot + i) of row b sees slot j <= slot + i that is not b's padding."""
        j = torch.arange(window, device=self.dev)
        q = self.slot + torch.arange(n, device=self.dev)
        ok = (j[None, :] <= q[:, None])[None, None] & (j[None, :] >= self.pad[:, None])[:, None, None, :]
        zero = torch.zeros((), dtype=self._dtype, device=self.dev)
        return torch.where(ok, zero, torch.finfo(self._dtype).min)

    def _positions(self, n: int) -> torch.Tensor:
        """[B, n]: the RoPE positions of the next n slots, each row counted from its first real token."""
        return (self.slot + torch.arange(n, device=self.dev))[None, :] - self.pad[:, None]

    def _first(self) -> torch.Tensor:
        """The slot of each row's first query in the next forward (0-d: every row's)."""
        return self.slot

    def _spans(self, n: int) -> bool:
        """A forward of n queries reads each row's own slots by the native kernel (model.native.spans) rather than
        a masked window: on a GPU, where the native cache and the kernel can (one graph per n, not per window)."""
        spec = getattr(self.target.model.config, "spec", None)
        if spec is None or not hasattr(self.cache, "set_window"):
            return False
        from .native.spans import usable

        return usable(self.dev, self._dtype, spec.head_dim, spec.num_heads // spec.num_kv_heads, n)

    def _run(
        self, ids: torch.Tensor, window: int | None, last_only: bool = False
    ) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """One forward of the next n slots; ``window`` None: the per-row route (:meth:`_spans`)."""
        n = ids.shape[1]
        mask: Any
        if window is None:
            from .native.spans import Spans

            self.cache.set_window(self.max_len)
            mask = Spans(self.pad, self._first())
        else:
            if hasattr(self.cache, "set_window"):
                self.cache.set_window(window)
            mask = self._mask(n, window)
        pos = self._positions(n)
        with TapRecorder(self.target.model, self.points) as rec:
            out = self._base(
                input_ids=ids,
                attention_mask=mask,
                position_ids=pos.clamp(min=0),
                use_cache=True,
                **{self._kw: self.cache},
            )
            taps = rec.take()
        self.slot.add_(n)
        last = out.last_hidden_state[:, -1:] if last_only else out.last_hidden_state
        return self.head(last.to(self.head.weight.dtype)).argmax(-1), taps

    @torch.inference_mode()
    def prefill(
        self, ids: torch.Tensor, pad: torch.Tensor, *, last_only: bool = True, sink: Sink | None = None
    ) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """Left-padded prompts ids [B, T] with pad [B] leading pads each: (argmax [B, 1] at the last slot,
        or [B, T] at every slot; taps). Eager: a prompt's shape is met once. ``sink``: each forward's taps handed
        over as it ends (first slot, taps [b, w, H], batch rows or None for every row) and none returned, so the
        batch's taps over its prompts never exist beside the store they go to (bench/RESULTS.md, 2026-12-05 12:41)."""
        self.pad.copy_(pad)
        self.crop(0)
        if hasattr(self.cache, "prefill_rotated"):  # unpadded rows too: the masked route read a 4D mask per head
            amax, taps = self._run_rotated(ids, pad, last_only, sink)
        else:
            amax, taps = self._run(ids, self._window(ids.shape[1]), last_only)
        if sink is not None and taps:  # one forward over every row (groups hand theirs over as they end)
            sink(0, taps)
            taps = {}
        self.length = ids.shape[1]
        return amax, taps

    def _run_rotated(
        self, ids: torch.Tensor, pad: torch.Tensor, last_only: bool, sink: Sink | None = None
    ) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """:meth:`_run` of a left-padded prefill, run right-padded with no mask: each row's tokens at 0..n-1, as
        an unpadded batch of one computes them (the replay's forward takes the same route), stored rotated into
        the left-padded cache (StaticKV.prefill_rotated); what it returns rotated back to the left-padded layout.

        Rows of unlike lengths run as groups of like ones (:func:`prefill_groups`), each at its own longest prompt's
        width: one forward at the batch's width computes every short prompt's padding as if it were tokens."""
        B, T = ids.shape
        lengths = (T - pad).tolist()
        groups = prefill_groups(lengths)
        if len(groups) == 1:
            amax, taps = self._rotated(ids, pad, last_only)
        else:
            amax = torch.zeros((B, 1) if last_only else (B, T), dtype=torch.long, device=ids.device)
            taps = {}
            for rows in groups:
                r = torch.tensor(rows, device=ids.device)
                w = max(lengths[i] for i in rows)  # the group's columns are the batch's last w
                a, got = self._rotated(ids[r, T - w :], pad[r] - (T - w), last_only, (r, T))
                amax[r, -a.shape[1] :] = a
                if sink is not None:
                    sink(T - w, got, rows)
                    continue
                for p, x in got.items():
                    if p not in taps:  # a group's pad columns beyond its width: zeros, read by no consumer
                        taps[p] = x.new_zeros(B, T, x.shape[-1])
                    taps[p][r, T - w :] = x
        self._set_length(T)
        return amax, taps

    def _rotated(
        self, ids: torch.Tensor, pad: torch.Tensor, last_only: bool, rows: tuple[torch.Tensor, int] | None = None
    ) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """One right-padded forward of left-padded ``ids`` [b, w] (``pad`` each); ``rows``: the cache rows they are
        and the width of the whole batch's layout, whose last w slots theirs are (None: the whole batch)."""
        B, T = ids.shape
        t = torch.arange(T, device=ids.device)
        back = (t[None, :] - pad[:, None]) % T  # left[b, s] = right[b, (s - pad[b]) mod T]
        if rows is None:
            self.cache.prefill_rotated(pad)
        else:
            self.cache.prefill_rotated(pad + (rows[1] - T), rows[0], rows[1])
        try:
            with TapRecorder(self.target.model, self.points) as rec:
                out = self._base(
                    input_ids=ids.gather(1, (t[None, :] + pad[:, None]) % T),
                    attention_mask=None,
                    position_ids=t[None].expand(B, T),
                    use_cache=True,
                    **{self._kw: self.cache},
                )
                taps = rec.take()
        finally:
            self.cache.prefill_rotated(None)

        def left(x: torch.Tensor) -> torch.Tensor:
            return x.gather(1, back[..., None].expand_as(x))

        h = out.last_hidden_state
        last = h.gather(1, (T - 1 - pad)[:, None, None].expand(B, 1, h.shape[-1])) if last_only else left(h)
        return self.head(last.to(self.head.weight.dtype)).argmax(-1), {p: left(x) for p, x in taps.items()}

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """ids [B, n] at the next n slots -> (argmax [B, n], taps {point: [B, n, H]}); on CUDA the outputs
        are a graph's own buffers, overwritten by its next replay: copy what must outlive it."""
        n = ids.shape[1]
        if self.length + n > self.max_len:
            raise ValueError(f"the static cache holds {self.max_len} slots; {self.length + n} asked")
        window = None if self._spans(n) else self._window(self.length + n)
        out = self._graphs.run((n, window), lambda x: self._run(x, window), ids)
        self.length += n
        return out

    def _set_length(self, length: int) -> None:
        self.slot.fill_(length)
        for layer in self.cache.layers:
            if getattr(layer, "is_initialized", False):
                layer.cumulative_length.fill_(length)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` slots: later writes overwrite the rest, which the mask already hides."""
        self._set_length(length)
        self.length = length


# a prefill group's padded tokens may exceed its prompts' own by this fraction; a group of fewer padded tokens than
# GROUP_TOKENS takes the next row whatever its length (a forward that small would not use the device)
GROUP_SLACK = 0.25
GROUP_TOKENS = 8192
# and no group passes GROUP_MAX_TOKENS padded tokens (a row longer than that is a group of its own): a forward's
# activations grow with its tokens (:func:`decode_batch_size` counts them), and 4 prompts of 32k tokens in one forward
# peaked at 89 GB where the plain script's whole peak was 53-61 GB (bench/RESULTS.md); 32k tokens a forward already
# keep the matmuls at their rate
GROUP_MAX_TOKENS = 32768


def prefill_groups(lengths: Sequence[int]) -> list[list[int]]:
    """The rows (indices into ``lengths``) as groups of like length, longest first: a row joins the current group
    while the group stays within GROUP_SLACK of padding over its tokens, or holds fewer than GROUP_TOKENS padded
    tokens, and within GROUP_MAX_TOKENS. One group where the lengths are alike and few (every fixture batch of equal
    prompts); prompts of thousands of tokens a few rows a group."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    real = 0
    for i in order:
        if groups:
            g = groups[-1]
            width = lengths[g[0]]
            alike = width * (len(g) + 1) <= (1 + GROUP_SLACK) * (real + lengths[i]) or width * len(g) < GROUP_TOKENS
            if alike and width * (len(g) + 1) <= GROUP_MAX_TOKENS:
                g.append(i)
                real += lengths[i]
                continue
        groups.append([i])
        real = lengths[i]
    return groups


def cache_keyword(base: torch.nn.Module) -> str:
    """transformers renamed the forward's past_key_values to cache (5.2x); 5.17 knows only the old name."""
    import inspect

    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


@torch.inference_mode()
def greedy_static(
    target: Target,
    prompts: list[list[int]],
    max_new_tokens: int,
    progress: Callable[[int], None] | None = None,
    record: Recorder | None = None,
) -> list[list[int]] | None:
    """One batch's greedy continuation over a static cache (None where :func:`static_cache` refuses).

    The step's feedback (argmax -> next input) stays on the device, so a graphed loop runs with no host
    sync; EOS is read every 32 steps there (every step on the CPU, where reading costs nothing), to stop
    once every row has ended. With ``record``, the decoder taps its points at every slot it runs, the last
    token's included (one step more), through ``record`` (its points' windows: :class:`model.recorded.Recorder`)."""
    B, T = len(prompts), max(len(p) for p in prompts)
    L = slots(T + max_new_tokens)
    cache = static_cache(target, B, L)
    if cache is None:
        return None
    eos, pad_id = eos_and_pad(target.tokenizer)
    ids, pads = left_padded(prompts, pad_id)
    dec = StaticDecoder(target, cache, B, L, record.points if record is not None else ())
    del cache
    try:
        if record is not None:  # before the prefill, which writes each group's taps straight into it
            record.open(pads.tolist(), L, T)
        nxt, _ = dec.prefill(ids.to(target.device), pads.to(target.device), sink=record.write if record is not None else None)
        out = torch.empty((B, max_new_tokens), dtype=torch.long, device=target.device)
        cur = nxt.clone()
        every = 32 if dec.graphed else 1
        for k in range(max_new_tokens):
            out[:, k] = cur[:, 0]
            if progress is not None:
                progress(k + 1)
            last = k + 1 == max_new_tokens or (
                eos is not None and (k + 1) % every == 0 and bool((out[:, : k + 1] == eos).any(-1).all())
            )
            if last and record is None:
                break
            at = dec.length
            amax, taps = dec.forward(cur)
            if record is not None:
                record.write(at, taps)
            if last:
                break
            cur.copy_(amax)
    finally:
        dec.close()
    got = out.tolist()
    return [list(p) + until_eos(got[i][: k + 1], eos) for i, p in enumerate(prompts)]


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, T], pads [B]): the prompts right-aligned at the longest one's end, each led by its pads."""
    T = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, T - len(p) :] = torch.as_tensor(list(p))
    return ids, torch.tensor([T - len(p) for p in prompts])


def eos_and_pad(tok: Any) -> tuple[int | None, int]:
    """The tokenizer's EOS and the id left padding writes (its pad token, else EOS, else 0)."""
    eos = tok.eos_token_id
    return eos, tok.pad_token_id if tok.pad_token_id is not None else (eos if eos is not None else 0)


def until_eos(new: list[int], eos: int | None) -> list[int]:
    """New tokens up to and including the first EOS: a row stops there, as ``generate`` stops it."""
    return new[: new.index(eos) + 1] if eos is not None and eos in new else new
