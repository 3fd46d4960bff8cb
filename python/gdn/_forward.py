"""gdn.forward: the whole of gdn_forward (SPEC.md), for any DLPack array."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from . import _arrays, _gdn
from .errors import InvalidArgumentError, error_for

Array = Any  # any array with __dlpack__: torch, JAX, CuPy, NumPy, ...

# The order of _gdn.forward's arrays (python/src/module.cpp, enum Slot).
_SLOTS = ("q", "k", "v", "g", "beta", "a", "A_log", "dt_bias", "initial_state", "cu_seqlens",
          "state_indices", "snapshot_indices", "out", "final_state", "state_snapshots")


class ForwardOutput(NamedTuple):
    """What gdn.forward returns. Unpacks as (o, final_state, state_snapshots)."""

    o: Array
    """[N, T, Hv, V] | [T_total, Hv, V], q's dtype (or out's)."""
    final_state: Optional[Array]
    """The state after the last token, when asked for; else None."""
    state_snapshots: Optional[Array]
    """The state after every token, when asked for; else None."""


def _option(name: str, value: str, table: dict) -> int:
    number = table.get(value)
    if number is None:
        raise InvalidArgumentError(f"{name}: {value!r} is not one of {', '.join(table)}")
    return number


def _state_dims(q: Array, v: Array, state_layout: str) -> tuple:
    """(Hv, R, C): (Hv, V, K) for the vk layout, (Hv, K, V) for kv."""
    hv, v_dim, k_dim = v.shape[-2], v.shape[-1], q.shape[-1]
    return (hv, v_dim, k_dim) if state_layout == "vk" else (hv, k_dim, v_dim)


def forward(
    q: Array,
    k: Array,
    v: Array,
    g: Optional[Array] = None,
    beta: Optional[Array] = None,
    *,
    a: Optional[Array] = None,
    A_log: Optional[Array] = None,
    dt_bias: Optional[Array] = None,
    initial_state: Optional[Array] = None,
    cu_seqlens: Optional[Array] = None,
    state_indices: Optional[Array] = None,
    snapshot_indices: Optional[Array] = None,
    out: Optional[Array] = None,
    final_state: Optional[Array] = None,
    state_snapshots: Optional[Array] = None,
    output_final_state: bool = False,
    output_state_snapshots: bool = False,
    gate: str = "log_decay",
    beta_mode: str = "prob",
    head_map: str = "block",
    state_layout: str = "vk",
    qk_l2norm: bool = False,
    scale: Optional[float] = None,
    backend: str = "auto",
    path: str = "auto",
    host_check_indices: bool = False,
    error_flags: Optional[Array] = None,
    num_threads: int = 0,
    checkpoint_every: int = 0,
    stream: Any = None,
) -> ForwardOutput:
    """Gated DeltaNet forward over a batch (SPEC.md), per sequence n, value head h, token t:

        S = alpha(g[t, h]) * S;  S += beta[t, h] * (v[t, h] - S k) k^T;  o[t, h] = scale * S q

    with q, k of key head j = head_map(h) and S a V x K state (f32 math).

    Letters: N sequences, T tokens each (T_total packed), Hk key heads, Hv value heads
    (Hv % Hk == 0), K key dim, V value dim, P pool slots. Arrays are anything with __dlpack__
    (torch, JAX, CuPy, NumPy; bfloat16 NumPy arrays from ml_dtypes too), on the CPU or a CUDA
    device. Their strides are passed to the library as they are (the last dimension must have
    stride 1); inputs are never copied.

    Inputs (dense batch | packed batch with cu_seqlens):
        q, k:    [N, T, Hk, K] | [T_total, Hk, K]; float32, bfloat16 or float16
                 (float64 for backend="reference")
        v:       [N, T, Hv, V] | [T_total, Hv, V]; q's dtype
        g:       [N, T, Hv] | [T_total, Hv]; float32 or q's dtype (None for gate="raw")
        beta:    [N, T, Hv] | [T_total, Hv]; float32 or q's dtype
        a:       gate="raw" only, shaped like g; A_log, dt_bias: gate="raw" only, [Hv]
        initial_state: [N, Hv, V, K] (vk) | [N, Hv, K, V] (kv), float32 or bfloat16; with
                 state_indices a pool [P, Hv, ...]. None: zeros.
        cu_seqlens: [N + 1] int32/int64, starts at 0, nondecreasing, ends at most at T_total.
        state_indices: [N] int32 in [-1, P): sequence n reads and writes pool slot
                 state_indices[n]; -1 is padding (no state read or written, outputs zero).
        snapshot_indices: [N, T] | [T_total] int32: pool slot for the state after each token
                 (-1: not stored); state_snapshots is then a pool [P2, Hv, ...].

    Outputs: given preallocated, or allocated by the array library of q on q's device.
        out:     o, [N, T, Hv, V] | [T_total, Hv, V]. Default: new, q's dtype.
        final_state: written when given (it may be initial_state itself: an in-place update), or
                 new when output_final_state=True: initial_state's shape and dtype, else
                 [N, Hv, V, K] (vk) / [N, Hv, K, V] (kv) float32. With state_indices pass it.
        state_snapshots: the state after every token when given, or new when
                 output_state_snapshots=True: [N, T, Hv, V, K] | [T_total, Hv, V, K] (vk; kv swaps
                 the last two) float32. With snapshot_indices pass it. With checkpoint_every=n
                 > 0 only the states after every n * CHECKPOINT_TOKENS (64) tokens of each
                 sequence are stored (prefix caching; the chunked path writes only these), the
                 other entries left as they were.

    Options (SPEC.md "Conventions"): gate "log_decay" (alpha = exp(g)) | "decay_rate"
    (alpha = exp(-g)) | "raw" (g = -exp(A_log) * softplus(a + dt_bias)); beta_mode "prob" |
    "logit" (sigmoid); head_map "block" (j = h // (Hv/Hk)) | "tiled" (j = h % Hk); state_layout
    "vk" | "kv"; qk_l2norm; scale (None: 1/sqrt(K)); backend "auto" | "cpu" | "cuda" |
    "reference" (the float64 oracle); path "auto" | "recurrent" | "chunked";
    host_check_indices validates device-resident index contents on the host first (one
    synchronisation); error_flags, a writable int32/uint32 array on the device, collects
    ERROR_FLAG_* bits from kernels that meet invalid index contents; num_threads for the CPU
    backends (0: all cores).

    Stream: CUDA work is enqueued on `stream` (an int cudaStream_t, a torch.cuda.Stream or a CuPy
    stream); by default on the current stream of q's library (torch, CuPy), else on the legacy
    default stream. The call does not synchronise; it is not differentiable.

    Returns ForwardOutput(o, final_state, state_snapshots), the last two None unless asked for.
    Raises a gdn.GdnError subclass (InvalidArgumentError, UnsupportedError, ...) carrying the
    library's message, which names the argument; a refused call writes nothing.
    """
    fw = _arrays.framework(q, "q")
    if scale == 0:
        raise InvalidArgumentError("scale: 0 is not supported (the C API reads 0 as 1/sqrt(K))")
    if out is None and v is not None:
        out = fw.empty(q, tuple(v.shape), q.dtype)
    if final_state is None and output_final_state:
        if state_indices is not None:
            raise InvalidArgumentError(
                "final_state: with state_indices the final state goes to a pool: pass "
                "final_state= (initial_state itself for an in-place update)")
        if initial_state is not None:
            final_state = _arrays.framework(initial_state, "initial_state").empty(
                initial_state, tuple(initial_state.shape), initial_state.dtype)
        else:
            n = len(cu_seqlens) - 1 if cu_seqlens is not None else q.shape[0]
            final_state = fw.empty(q, (n,) + _state_dims(q, v, state_layout), "float32")
    if state_snapshots is None and output_state_snapshots:
        if snapshot_indices is not None:
            raise InvalidArgumentError(
                "state_snapshots: with snapshot_indices the snapshots go to a pool: pass "
                "state_snapshots=")
        shape = tuple(v.shape[:-2]) + _state_dims(q, v, state_layout)
        state_snapshots = fw.empty(q, shape, "float32")

    arrays = [q, k, v, g, beta, a, A_log, dt_bias, initial_state, cu_seqlens, state_indices,
              snapshot_indices, out, final_state, state_snapshots]
    bf16_bits = 0
    for slot, x in enumerate(arrays):
        if x is not None:
            arrays[slot], bf16 = _arrays.framework(x, _SLOTS[slot]).export(x)
            bf16_bits |= bf16 << slot

    stream_ptr = fw.current_stream(q) if stream is None else _arrays.stream_handle(stream)
    if error_flags is not None:
        error_flags = _arrays.framework(error_flags, "error_flags").export(error_flags)[0]
    failure = _gdn.forward(
        tuple(arrays), bf16_bits,
        _option("gate", gate, _gdn.GATE),
        _option("beta_mode", beta_mode, _gdn.BETA_MODE),
        _option("head_map", head_map, _gdn.HEAD_MAP),
        _option("state_layout", state_layout, _gdn.STATE_LAYOUT),
        bool(qk_l2norm), 0.0 if scale is None else float(scale),
        _option("backend", backend, _gdn.BACKEND),
        _option("path", path, _gdn.PATH),
        bool(host_check_indices), error_flags, int(num_threads), stream_ptr,
        # the workspace as float32 words (the array views take no byte dtype), rounded up
        lambda nbytes: fw.empty(q, ((nbytes + 3) // 4,), "float32"),
        int(checkpoint_every))
    if failure is not None:
        raise error_for(*failure)
    return ForwardOutput(out, final_state, state_snapshots)
