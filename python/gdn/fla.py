"""Drop-in replacements for flash-linear-attention's gated delta rule functions.

    from gdn.fla import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

takes the place of `from fla.ops.gated_delta_rule import ...`: same names, argument names,
defaults, shapes and return values (flash-linear-attention 0.6.0), computed by gdn.forward on the
arrays' device and the current stream. fla's shapes: q, k [B, T, H, K]; v [B, T, HV, V];
g, beta [B, T, HV]; states [N, HV, K, V] ([N, HV, V, K] with state_v_first=True); with
cu_seqlens [N + 1] the batch is packed: B == 1 and T is the total token count.

Differences: forward only (a call that would need gradients raises UnsupportedError);
fla arguments gdn does not implement (gk, gv, per-channel beta [B, T, HV, V], allow_neg_eigval,
cp_context, head_first) raise UnsupportedError naming them; hints that only steer fla's own
kernels (cu_seqlens_cpu, chunk_indices, chunk_size) are accepted and not needed; other keyword
arguments are ignored, as fla ignores them. Like fla, an input whose last dimension is not
contiguous is copied (torch); any other strides are used as they are.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional, Tuple

from . import _arrays
from ._forward import forward
from .errors import InvalidArgumentError, UnsupportedError

Tensor = Any  # torch.Tensor in fla; any DLPack array works here


def _state_v_first(state_v_first: bool, kwargs: dict) -> bool:
    """fla's deprecated spelling `transpose_state_layout`, handled as fla handles it."""
    if "transpose_state_layout" not in kwargs:
        return state_v_first
    if state_v_first:
        raise InvalidArgumentError(
            "Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
    warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                  DeprecationWarning, stacklevel=3)
    return bool(kwargs.pop("transpose_state_layout"))


def _refuse(func: str, **used: bool) -> None:
    names = [name for name, is_used in used.items() if is_used]
    if names:
        raise UnsupportedError(f"{func}: {', '.join(names)} is not supported by gdn")


def _refuse_grad(func: str, **tensors: Any) -> None:
    torch = _arrays.loaded("torch")
    if torch is None or not torch.is_grad_enabled():
        return
    names = [name for name, t in tensors.items() if getattr(t, "requires_grad", False)]
    if names:
        raise UnsupportedError(
            f"{func}: {', '.join(names)} requires grad, but gdn computes the forward pass only; "
            "call it under torch.no_grad() or torch.inference_mode()")


def _gated_delta_rule(func: str, path: str, q: Tensor, k: Tensor, v: Tensor,
                      g: Optional[Tensor], beta: Optional[Tensor], scale: Optional[float],
                      initial_state: Optional[Tensor], output_final_state: bool,
                      use_qk_l2norm_in_kernel: bool, use_gate_in_kernel: bool,
                      A_log: Optional[Tensor], dt_bias: Optional[Tensor],
                      use_beta_sigmoid_in_kernel: bool, state_v_first: bool,
                      cu_seqlens: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    """Both fla functions in terms of gdn.forward."""
    _refuse_grad(func, q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, A_log=A_log,
                 dt_bias=dt_bias)
    fw = _arrays.framework(q, "q")
    heads = tuple(v.shape[:-1])  # [B, T, HV]
    if beta is None:
        beta = fw.full(q, heads, q.dtype, 1.0)
    elif beta.ndim == v.ndim:
        raise UnsupportedError(f"{func}: beta: per-channel beta [B, T, HV, V] is not supported "
                               "by gdn (one beta per head: [B, T, HV])")
    a = None
    if use_gate_in_kernel:
        if A_log is None:
            raise InvalidArgumentError(f"{func}: A_log must be given when use_gate_in_kernel=True")
        if g is None:
            raise InvalidArgumentError(
                f"{func}: g (raw, before the gate) must be given when use_gate_in_kernel=True")
        a, g = g, None
        if dt_bias is None:
            dt_bias = fw.full(q, heads[-1:], "float32", 0.0)
    else:
        A_log = dt_bias = None
        if g is None:  # fused_recurrent without decay
            g = fw.full(q, heads, "float32", 0.0)

    if initial_state is not None:  # fla reads the initial state as float32, whatever its dtype
        initial_state = _arrays.framework(initial_state, "initial_state").float32(initial_state)
    packed = cu_seqlens is not None
    if packed:
        if q.shape[0] != 1:
            raise InvalidArgumentError(
                f"{func}: q: the batch size must be 1 with cu_seqlens (one packed row of all "
                f"sequences), got {q.shape[0]}")
        q, k, v, g, beta, a = (None if x is None else x[0] for x in (q, k, v, g, beta, a))
    q, k, v, g, beta, a = (None if x is None else fw.unit_last_stride(x)
                           for x in (q, k, v, g, beta, a))

    final_state = None
    if output_final_state:  # fla's final state is float32 whatever the initial state's dtype
        n = len(cu_seqlens) - 1 if packed else q.shape[0]
        hv, v_dim, k_dim = v.shape[-2], v.shape[-1], q.shape[-1]
        shape = (n, hv, v_dim, k_dim) if state_v_first else (n, hv, k_dim, v_dim)
        final_state = fw.empty(q, shape, "float32")
    o = forward(q, k, v, g, beta, a=a, A_log=A_log, dt_bias=dt_bias, initial_state=initial_state,
                cu_seqlens=cu_seqlens, final_state=final_state,
                gate="raw" if use_gate_in_kernel else "log_decay",
                beta_mode="logit" if use_beta_sigmoid_in_kernel else "prob",
                state_layout="vk" if state_v_first else "kv",
                qk_l2norm=use_qk_l2norm_in_kernel, scale=scale, path=path).o
    return (o[None] if packed else o), final_state


def chunk_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    cu_seqlens_cpu: Optional[Tensor] = None,
    chunk_indices: Optional[Tensor] = None,
    cp_context: Any = None,
    **kwargs: Any,
) -> Tuple[Tensor, Optional[Tensor]]:
    """flash-linear-attention's chunk_gated_delta_rule (prefill), computed by gdn (path "auto").

    Args:
        q, k: [B, T, H, K]. v: [B, T, HV, V], HV % H == 0 (value head h reads key head
            h // (HV / H)). q, k, v share one dtype: float32, bfloat16 or float16.
        g: [B, T, HV], log decay (the state is multiplied by exp(g)); float32 or q's dtype.
            With use_gate_in_kernel=True (keyword) g is the raw input a of
            g = -exp(A_log) * softplus(a + dt_bias); A_log and dt_bias ([HV]) are keywords too.
        beta: [B, T, HV]; with use_beta_sigmoid_in_kernel=True, logits (sigmoid is applied).
        scale: default 1 / sqrt(K).
        initial_state: [N, HV, K, V] ([N, HV, V, K] with state_v_first=True); N = B, or
            len(cu_seqlens) - 1. Read as float32 (another dtype is converted first, as fla reads
            it).
        output_final_state: return the state after the last token (float32, initial_state's
            layout).
        use_qk_l2norm_in_kernel: L2-normalise q and k per head (eps 1e-6).
        cu_seqlens: [N + 1] int32/int64 offsets of a packed batch (B must be 1).
        cu_seqlens_cpu, chunk_indices, chunk_size (keyword): fla's kernel hints, not needed.

    Returns:
        (o, final_state): o [B, T, HV, V] in q's dtype; final_state [N, HV, K, V] float32, or
        None when output_final_state is False.
    """
    state_v_first = _state_v_first(state_v_first, kwargs)
    _refuse("chunk_gated_delta_rule", allow_neg_eigval=bool(allow_neg_eigval),
            cp_context=cp_context is not None, head_first="head_first" in kwargs)
    if kwargs.get("chunk_size", 64) not in (16, 32, 64):
        raise InvalidArgumentError(
            f"chunk_gated_delta_rule: chunk_size must be 16, 32 or 64, got {kwargs['chunk_size']}")
    return _gated_delta_rule(
        "chunk_gated_delta_rule", "auto", q, k, v, g, beta, scale, initial_state,
        output_final_state, use_qk_l2norm_in_kernel, bool(kwargs.get("use_gate_in_kernel", False)),
        kwargs.get("A_log"), kwargs.get("dt_bias"), use_beta_sigmoid_in_kernel, state_v_first,
        cu_seqlens)


def fused_recurrent_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor] = None,
    gk: Optional[Tensor] = None,
    gv: Optional[Tensor] = None,
    beta: Optional[Tensor] = None,
    scale: Optional[float] = None,
    initial_state: Optional[Tensor] = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    A_log: Optional[Tensor] = None,
    dt_bias: Optional[Tensor] = None,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: Optional[Tensor] = None,
    **kwargs: Any,
) -> Tuple[Tensor, Optional[Tensor]]:
    """flash-linear-attention's fused_recurrent_gated_delta_rule (decode, speculative verify),
    computed by gdn's recurrent path.

    Args:
        q, k: [B, T, H, K]. v: [B, T, HV, V], HV % H == 0.
        g: [B, T, HV] log decay; None: no decay. With use_gate_in_kernel=True, the raw input a
            of g = -exp(A_log) * softplus(a + dt_bias), A_log [HV] required, dt_bias [HV] or None.
        gk, gv: not supported by gdn (must be None).
        beta: [B, T, HV]; None: ones. Logits with use_beta_sigmoid_in_kernel=True.
        scale: default 1 / sqrt(K).
        initial_state: [N, HV, K, V] ([N, HV, V, K] with state_v_first=True), read as float32.
        output_final_state: return the state after the last token (float32).
        use_qk_l2norm_in_kernel: L2-normalise q and k per head (eps 1e-6).
        cu_seqlens: [N + 1] int32/int64 offsets of a packed batch (B must be 1).

    Returns:
        (o, final_state): o [B, T, HV, V] in q's dtype; final_state [N, HV, K, V] float32, or
        None when output_final_state is False.
    """
    state_v_first = _state_v_first(state_v_first, kwargs)
    _refuse("fused_recurrent_gated_delta_rule", gk=gk is not None, gv=gv is not None,
            allow_neg_eigval=bool(allow_neg_eigval))
    return _gated_delta_rule(
        "fused_recurrent_gated_delta_rule", "recurrent", q, k, v, g, beta, scale, initial_state,
        output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias,
        use_beta_sigmoid_in_kernel, state_v_first, cu_seqlens)


# fla's short names.
chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule

__all__ = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "chunk_gdn",
           "fused_recurrent_gdn"]
