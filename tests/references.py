"""Independent torch references, written from each op's definition in float64."""

from __future__ import annotations

import math

import torch


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool = False
) -> torch.Tensor:
    """weight None: no scale."""
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    if weight is None:
        return normed
    return normed * (weight.double() + 1 if gemma else weight.double())


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    gemma: bool = False,
    rounded_sum: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(new x, new residual): residual + x, and its rmsnorm; rounded_sum normalizes the sum
    rounded to x's dtype instead of the exact one."""
    summed = x.double() + residual.double()
    if rounded_sum:
        summed = summed.to(x.dtype).double()
    return rmsnorm(summed, weight, eps, gemma), summed


def rope(
    positions: torch.Tensor,
    x: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> torch.Tensor:
    """x [tokens, heads, head_dim] rotated by the first rotary_dim columns of each head."""
    rotary_dim = cos_sin_cache.shape[1]
    half = rotary_dim // 2
    cos_sin = cos_sin_cache.double()[positions.long()]
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:]
    x64 = x.double()
    rot, rest = x64[..., :rotary_dim], x64[..., rotary_dim:]
    if is_neox:
        a, b = rot[..., :half], rot[..., half:]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    return torch.cat([rotated, rest], dim=-1)


def rope_cache(max_position: int, rotary_dim: int, base: float = 10000.0) -> torch.Tensor:
    """float32 [max_position, rotary_dim]: cos of every (position, frequency), then sin."""
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float()


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    """act(x) in float64: "silu", "gelu" (erf), "gelu_tanh" (tanh approximation),
    "gelu_quick" (x * sigmoid(1.702 x))."""
    a = x.double()
    # gelu as a * Phi(a) with Phi from erfc, and 0.5 * (1 + tanh(z)) as sigmoid(2z):
    # 1 + erf and 1 + tanh cancel to 0 far below zero even in float64.
    if name == "silu":
        return a / (1 + torch.exp(-a))
    if name == "gelu":
        return 0.5 * a * torch.special.erfc(-a / math.sqrt(2))
    if name == "gelu_tanh":
        return a * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))
    if name == "gelu_quick":
        return a * torch.sigmoid(1.702 * a)
    raise ValueError(f"no reference activation {name!r}")


def act_and_mul(op: str, x: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    d = x.shape[-1] // 2
    a, b = x64[..., :d], x64[..., d:]
    return activation(op.removesuffix("_and_mul"), a) * b


def fatrelu_and_mul(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """(gate if gate > threshold else 0) * up, gate and up the halves of x."""
    gate, up = x.double().chunk(2, dim=-1)
    return torch.where(gate > threshold, gate, 0.0) * up


def swigluoai_and_mul(x: torch.Tensor, alpha: float = 1.702, limit: float = 7.0) -> torch.Tensor:
    """gpt-oss's clamped SwiGLU: gate x[..., 0::2] clamped to at most limit, up
    x[..., 1::2] to [-limit, limit]; (up + 1) * gate * sigmoid(alpha * gate)."""
    x64 = x.double()
    gate = x64[..., 0::2].clamp(max=limit)
    up = x64[..., 1::2].clamp(-limit, limit)
    return (up + 1) * gate * torch.sigmoid(alpha * gate)


# Quantization (sycl_kernels.ops.quant): a float32 scale per group of a row's values.

QUANT_MAX = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}


def default_scale_min(qdtype: torch.dtype) -> float:
    """vLLM's minimum dynamic scale, 1 / (qmax * 512) computed in float32."""
    return (torch.tensor(1.0) / (QUANT_MAX[qdtype] * 512)).item()


def ue8m0(scale: torch.Tensor) -> torch.Tensor:
    """The smallest power of two at or above each float32 scale, at least 2**-126
    (infinity stays)."""
    scale = torch.clamp(scale.float(), min=2.0**-126)
    mantissa, exponent = torch.frexp(scale)  # scale = mantissa * 2**exponent, mantissa in [0.5, 1)
    exponent = exponent - (mantissa == 0.5).int()
    power = torch.ldexp(torch.ones_like(scale), exponent.float())
    return torch.where(torch.isinf(scale), scale, power)


def group_scales(scale: torch.Tensor, lead: tuple, hidden: int) -> torch.Tensor:
    """A static scale in any of its forms (one element; [..., G] with x's leading
    dimensions; for 2-D x [R, G], blocks of rows / R rows) as [*lead, G]."""
    scale = scale.float()
    if scale.numel() == 1:
        return scale.reshape(1).expand(*lead, 1)
    if scale.dim() == 2 and len(lead) == 1 and scale.shape[0] != lead[0]:
        return scale.repeat_interleave(lead[0] // scale.shape[0], dim=0)
    return scale


def quantize(
    values: torch.Tensor, scales: torch.Tensor, qdtype: torch.dtype, truncate: bool = False
) -> torch.Tensor:
    """values [..., H] (float32, any float type converted) quantized with scales [..., G]
    (a scale per H / G values): v * (1 / s), the reciprocal in float32 (0 for s == 0),
    then fp8: clamped to +-448 and cast (to nearest even; NaN stays NaN); int8:
    clamped to [-128, 127], rounded to nearest even or toward zero, NaN to 0."""
    v = values.float()
    s = scales.float()
    inverse = torch.where(s == 0, torch.zeros_like(s), 1.0 / s)
    inverse = inverse.repeat_interleave(v.shape[-1] // s.shape[-1], dim=-1)
    q = v * inverse
    if qdtype == torch.float8_e4m3fn:
        return q.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    q = q.clamp(-128.0, 127.0)
    q = torch.trunc(q) if truncate else torch.round(q)
    return torch.nan_to_num(q, nan=0.0).to(torch.int8)


def absmax(values: torch.Tensor) -> torch.Tensor:
    """|values| with NaN as 0 (the absolute maximum ignores NaN), as float32."""
    a = values.float().abs()
    return torch.where(torch.isnan(a), torch.zeros_like(a), a)


def dynamic_scale(
    amax: torch.Tensor,
    qdtype: torch.dtype,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    round_to_ue8m0: bool = False,
) -> torch.Tensor:
    """max(min(amax, scale_ub) / qmax, scale_min) in float32 (scale_min None: vLLM's),
    rounded up to a power of two with round_to_ue8m0."""
    amax = amax.float()
    if scale_ub is not None:
        amax = torch.minimum(amax, scale_ub.float().reshape(()))
    if scale_min is None:
        scale_min = default_scale_min(qdtype)
    s = torch.maximum(amax / QUANT_MAX[qdtype], torch.tensor(scale_min, dtype=torch.float32))
    return ue8m0(s) if round_to_ue8m0 else s


def dynamic_quantize(
    values: torch.Tensor,
    qdtype: torch.dtype,
    group_size: int | None = None,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    round_to_ue8m0: bool = False,
    truncate: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scales [..., G]): values [..., H] quantized with a scale per row (group_size
    None) or per group of group_size values, from each group's absolute maximum."""
    hidden = values.shape[-1]
    group = hidden if group_size is None else group_size
    grouped = absmax(values).reshape(*values.shape[:-1], hidden // group, group)
    scales = dynamic_scale(grouped.amax(-1), qdtype, scale_ub, scale_min, round_to_ue8m0)
    return quantize(values, scales, qdtype, truncate), scales


def dynamic_quantize_per_tensor(
    values: torch.Tensor,
    qdtype: torch.dtype,
    scale_ub: torch.Tensor | None = None,
    scale_min: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale [1]): one scale for the tensor (scale_min 0 by default)."""
    amax = absmax(values).amax() if values.numel() else torch.tensor(0.0)
    scale = dynamic_scale(amax, qdtype, scale_ub, scale_min).reshape(1)
    return quantize(values, scale.expand(*values.shape[:-1], 1), qdtype), scale


def rmsnorm_values(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(rmsnorm's float32 values, not rounded to x's dtype, computed in float64; the
    new residual): with residual, the sum x + residual rounded to x's dtype is stored
    and normalized."""
    new_residual = None
    if residual is not None:
        new_residual = (x.float() + residual.float()).to(x.dtype)
        x = new_residual
    return rmsnorm(x, weight, eps).float(), new_residual


def silu_and_mul_values(x: torch.Tensor, rounded: bool = True) -> torch.Tensor:
    """silu(gate) * up, gate and up the halves of x: rounded, as torch computes it in
    x's dtype (silu rounded, then the product); else in float32, not rounded."""
    gate, up = x.chunk(2, dim=-1)
    if rounded:
        return (torch.nn.functional.silu(gate) * up).float()
    return torch.nn.functional.silu(gate.float()) * up.float()


def timestep_embedding(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
) -> torch.Tensor:
    half = dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freq = torch.exp(-math.log(max_period) * i / (half - downscale_freq_shift))
    arg = scale * t.double()[:, None] * freq[None, :]
    first, second = (arg.cos(), arg.sin()) if flip_sin_to_cos else (arg.sin(), arg.cos())
    out = torch.cat([first, second], dim=-1)
    if dim % 2:
        out = torch.nn.functional.pad(out, (0, 1))
    return out


def paged_store(
    cache_slots: torch.Tensor,
    rows: torch.Tensor,
    slots: torch.Tensor,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """A paged KV store: a copy of cache_slots [num_slots, ...] with rows[t] written at
    slots[t] (index_copy_; negative slots skipped); into a float8_e4m3fn cache each
    value as vLLM stores it: (x / scale) in float32, clamped to +-448, then cast."""
    out = cache_slots.clone()
    keep = slots >= 0
    values = rows[keep]
    if out.dtype == torch.float8_e4m3fn:  # index_copy_ has no float8: copy the bits
        values = (values.float() / scale.float()).clamp(-448.0, 448.0).to(out.dtype)
        out.view(torch.uint8).index_copy_(0, slots[keep], values.view(torch.uint8))
        return out
    out.index_copy_(0, slots[keep], values.to(out.dtype))
    return out


def paged_gather(
    cache: torch.Tensor,
    dst: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """A paged KV gather (vllm-xpu-kernels tests/test_cache.py test_gather_cache_mla's
    block by block concatenation): a copy of dst whose rows cu_seq_lens[b] ..
    cu_seq_lens[b + 1] - 1 hold sequence b's tokens from seq_starts[b] (or 0) on, read
    through block_table[b]; with scale, fp8 values as float(x) * scale in float32,
    rounded to dst's dtype."""
    out = dst.clone()
    bits = (lambda t: t.view(torch.uint8)) if cache.element_size() == 1 else (lambda t: t)
    block_size = cache.shape[1]
    for b in range(block_table.shape[0]):
        lo, hi = int(cu_seq_lens[b]), int(cu_seq_lens[b + 1])
        if hi == lo:
            continue
        start = 0 if seq_starts is None else int(seq_starts[b])
        first, last = start // block_size, (start + hi - lo - 1) // block_size
        blocks = [bits(cache)[int(block_table[b, j])] for j in range(first, last + 1)]
        skip = start - first * block_size
        tokens = torch.cat(blocks)[skip : skip + hi - lo]
        if scale is None:
            bits(out)[lo:hi] = tokens
        else:
            values = tokens.view(cache.dtype).float() * scale.float()
            out[lo:hi] = values.to(dst.dtype)
    return out


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """assert_close tolerances: fp16/bf16 outputs are rounded to 8 or 11 significant bits."""
    return {
        torch.float32: {"rtol": 1e-5, "atol": 1e-5},
        torch.float16: {"rtol": 1e-2, "atol": 1e-2},
        torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
    }[dtype]


def assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """got (in its dtype) against a float64 reference, with that dtype's tolerance."""
    torch.testing.assert_close(got.double(), want, **tolerance(got.dtype))


def moe_scores(logits: torch.Tensor, scoring: str) -> torch.Tensor:
    """MoE router scores in float64: softmax or sigmoid of the logits, or them ("none")."""
    x = logits.double()
    if scoring == "softmax":
        return torch.softmax(x, dim=-1)
    if scoring == "sigmoid":
        return torch.sigmoid(x)
    return x


def _stable_topk(x: torch.Tensor, k: int) -> torch.Tensor:
    """The indices of the k largest of each row, equal values lower index first."""
    return torch.sort(x, dim=-1, descending=True, stable=True)[1][:, :k]


def moe_topk(
    logits: torch.Tensor,
    topk: int,
    scoring: str = "softmax",
    bias: torch.Tensor | None = None,
    renormalize: bool = False,
    num_expert_group: int | None = None,
    topk_group: int | None = None,
    group_scoring: str | None = None,
    routed_scaling_factor: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weights, ids, keys) in float64 as vLLM's torch-native grouped_topk: keys =
    scores + bias, -inf outside the topk_group best groups (scored by their max key, or
    with group_scoring "top2_sum" the sum of their two best; None: top2_sum with a bias);
    ids the topk largest keys (equal keys and group scores: lower index first); weights
    their unbiased scores, divided by their sum with renormalize, times
    routed_scaling_factor."""
    scores = moe_scores(logits, scoring)
    keys = scores if bias is None else scores + bias.double()
    if num_expert_group is not None:
        tokens = keys.shape[0]
        grouped = keys.view(tokens, num_expert_group, -1)
        if group_scoring is None:
            group_scoring = "top2_sum" if bias is not None else "max"
        if group_scoring == "top2_sum":
            group_scores = grouped.topk(2, dim=-1)[0].sum(dim=-1)
        else:
            group_scores = grouped.max(dim=-1).values
        kept = _stable_topk(group_scores, topk_group)
        mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
        keys = keys.masked_fill(~mask[:, :, None].expand_as(grouped).reshape(keys.shape), -math.inf)
    ids = _stable_topk(keys, topk)
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights * routed_scaling_factor, ids, keys


def moe_align_block_size(topk_ids, num_experts, block_size, expert_map=None):
    """Sort-based: the flat slot indices per expert (a stable sort), each run padded
    with numel to a multiple of block_size; (per-expert index lists, expert of each
    block, padded total)."""
    flat = topk_ids.reshape(-1).long()
    experts = flat if expert_map is None else expert_map.long()[flat]
    order = torch.sort(experts, stable=True).indices
    runs, blocks = [], []
    for e in range(num_experts):
        idx = order[experts[order] == e]
        runs.append(idx.tolist())
        blocks += [e] * -(-len(idx) // block_size)
    return runs, blocks, len(blocks) * block_size


def moe_sum(x, topk_ids=None, expert_map=None, scale=1.0):
    """float64 sum over active slots (vLLM's moe_sum), times scale."""
    active = torch.ones(x.shape[:2], dtype=torch.bool)
    if topk_ids is not None:
        active = topk_ids >= 0
        if expert_map is not None:
            active &= expert_map.long()[topk_ids.long().clamp(min=0)] >= 0
    return (x.double() * active[..., None]).sum(1) * scale


def _per_row(value, rows: int, dtype: torch.dtype) -> torch.Tensor | None:
    """A sampling filter's parameter as a [rows] tensor (None: off)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return torch.full((rows,), value, dtype=dtype)


def _top_k_mask(p: torch.Tensor, kept: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """kept entries >= the k-th largest kept one (all of them when fewer than k)."""
    values = torch.where(kept, p, -1.0).sort(-1, descending=True).values
    kth = values.gather(1, (k.clamp(1, p.shape[1]) - 1)[:, None])
    return kept & (p >= kth.clamp(min=0.0))


def _top_p_mask(p: torch.Tensor, kept: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """kept entries >= the largest t with mass(kept >= t) >= top_p * mass(kept)."""
    values = torch.where(kept, p, 0.0).sort(-1, descending=True).values
    mass = values.cumsum(-1)
    target = top_p[:, None] * mass[:, -1:]
    first = (mass < target).sum(-1, keepdim=True).clamp(max=p.shape[1] - 1)
    return kept & (p >= values.gather(1, first))


def sampling_mask(probs, top_k=None, top_p=None, min_p=None, joint=False) -> torch.Tensor:
    """Sort-based, float64: which entries of each row of probs top-k, top-p (joint, or
    top-k first) and then min-p keep (sycl_kernels.ops.sampling's module doc). Scalars
    or [rows] tensors; None: off. Entries not positive and finite are never kept."""
    p = probs.double()
    rows = p.shape[0]
    support = torch.isfinite(p) & (p > 0)
    p = torch.where(support, p, 0.0)
    k, tp, mp = (
        _per_row(top_k, rows, torch.int64),
        _per_row(top_p, rows, torch.float64),
        _per_row(min_p, rows, torch.float64),
    )
    kept = support
    if k is not None:
        kept = _top_k_mask(p, support, k)
    if tp is not None:
        kept = _top_p_mask(p, support if joint else kept, tp) & kept
    if mp is not None:
        kept &= p >= (mp.float() * p.max(-1).values.float()).double()[:, None]
    return kept


def renormalized(probs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """float64 probs kept where mask, divided by their sum (zeros for a row keeping none)."""
    kept = torch.where(mask, probs.double(), 0.0)
    total = kept.sum(-1, keepdim=True)
    return torch.where(total > 0, kept / total.clamp(min=1e-300), 0.0)


def philox4x32_10(counter: tuple[int, ...], key: tuple[int, int]) -> tuple[int, ...]:
    """Philox 4x32-10 (Random123's philox4x32_10) in Python integers."""
    c, (k0, k1) = list(counter), key
    mask = 0xFFFFFFFF
    for round_ in range(10):
        if round_:
            k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & mask, (p0 >> 32) ^ c[3] ^ k1, p0 & mask]
    return tuple(c)


def philox_uniform(seed: int, offset: int, subsequence: int) -> float:
    """sample_from_probs' uniform of one output row: the top 24 bits of Philox's first
    word for counter (offset, subsequence) under key seed, all 64-bit."""
    mask = 0xFFFFFFFF
    seed, offset = seed & (2**64 - 1), offset & (2**64 - 1)
    counter = (offset & mask, offset >> 32, subsequence & mask, subsequence >> 32)
    return (philox4x32_10(counter, (seed & mask, seed >> 32))[0] >> 8) * 2.0**-24


def penalties(
    logits: torch.Tensor,
    prompt_mask: torch.Tensor | None,
    output_counts: torch.Tensor | None,
    repetition: torch.Tensor,
    frequency: torch.Tensor,
    presence: torch.Tensor,
) -> torch.Tensor:
    """vLLM's penalties (vllm/model_executor/layers/utils.py apply_penalties with the torch
    form of apply_repetition_penalties_) in float32, rounded to logits' dtype once:
    penalties [batch] (float32); output_counts a count tensor (a bool mask counts 0/1)."""
    x = logits.float()
    counts = torch.zeros_like(x) if output_counts is None else output_counts.float()
    seen = counts > 0
    if prompt_mask is not None:
        seen = seen | prompt_mask
    rep = repetition.float().unsqueeze(1).repeat(1, x.shape[1])
    rep[~seen] = 1.0
    x = torch.where(x > 0, x / rep, x * rep)
    if output_counts is not None:
        x = x - frequency.float().unsqueeze(1) * counts
        x = x - presence.float().unsqueeze(1) * (counts > 0)
    return x.to(logits.dtype)


def repetition_penalty_by_ids(
    logits: torch.Tensor, input_ids: torch.Tensor, penalty: torch.Tensor
) -> torch.Tensor:
    """Hugging Face's RepetitionPenaltyLogitsProcessor (gather, penalize, scatter) in
    float32, rounded to logits' dtype; ids outside [0, vocab) dropped (HF drops ids >=
    vocab, and raises for negative ones); penalty [batch]."""
    vocab = logits.shape[1]
    x = torch.nn.functional.pad(logits.float(), (0, 1))
    ids = torch.where((input_ids < 0) | (input_ids >= vocab), vocab, input_ids).long()
    score = torch.gather(x, 1, ids)
    p = penalty.float().unsqueeze(1)
    score = torch.where(score < 0, score * p, score / p)
    return x.scatter(1, ids, score)[:, :vocab].to(logits.dtype)


def top_k_mask(logits: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Hugging Face's TopKLogitsWarper per row (scores < topk(scores, k).values[-1] set to
    -inf), a k below 1 or at least vocab keeping the row."""
    rows = []
    for row, k in zip(logits, top_k.tolist(), strict=True):
        if 1 <= k < row.numel():
            kth = torch.topk(row.float(), k).values[-1]
            row = row.masked_fill(row.float() < kth, -math.inf)
        rows.append(row)
    return torch.stack(rows)
