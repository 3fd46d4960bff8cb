"""An independent float64 NumPy recurrence (SPEC.md) and SPEC.md's test inputs, for the tests.

Dense batches only; tests cut packed batches into sequences themselves. States are returned in
the layout asked for ("vk": [N, Hv, V, K], "kv": [N, Hv, K, V]).
"""

from __future__ import annotations

import numpy as np


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rel_err(x, ref) -> float:
    """||x - ref|| / ||ref|| over the whole array, inf if x has a NaN or Inf."""
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        return float("inf")
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def recurrence(q, k, v, g=None, beta=None, *, a=None, A_log=None, dt_bias=None,
               initial_state=None, gate="log_decay", beta_mode="prob", head_map="block",
               state_layout="vk", qk_l2norm=False, scale=None):
    """(o [N, T, Hv, V], final state, snapshots [N, T, Hv, R, C]) in float64."""
    f64 = lambda x: None if x is None else np.asarray(x, dtype=np.float64)  # noqa: E731
    q, k, v, g, beta, a, A_log, dt_bias = map(f64, (q, k, v, g, beta, a, A_log, dt_bias))
    n, t_len, hk, k_dim = q.shape
    hv, v_dim = v.shape[2:]
    heads = np.arange(hv)
    j = heads // (hv // hk) if head_map == "block" else heads % hk
    q, k = q[:, :, j], k[:, :, j]  # [N, T, Hv, K]
    if qk_l2norm:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    scale = 1.0 / np.sqrt(k_dim) if scale is None else scale
    if gate == "raw":
        alpha = np.exp(-np.exp(A_log) * softplus(a + dt_bias))
    else:
        alpha = np.exp(-g) if gate == "decay_rate" else np.exp(g)
    if beta_mode == "logit":
        beta = sigmoid(beta)

    S = np.zeros((n, hv, v_dim, k_dim))  # V x K per head
    if initial_state is not None:
        S = f64(initial_state).copy()
        if state_layout == "kv":
            S = S.swapaxes(-1, -2).copy()
    o = np.zeros((n, t_len, hv, v_dim))
    snapshots = np.zeros((n, t_len, hv, v_dim, k_dim))
    for t in range(t_len):
        S = alpha[:, t, :, None, None] * S                                   # decay first
        delta = beta[:, t, :, None] * (v[:, t] - np.einsum("nhvk,nhk->nhv", S, k[:, t]))
        S = S + delta[..., None] * k[:, t, :, None, :]                       # + delta k^T
        o[:, t] = scale * np.einsum("nhvk,nhk->nhv", S, q[:, t])
        snapshots[:, t] = S
    if state_layout == "kv":
        S, snapshots = S.swapaxes(-1, -2), snapshots.swapaxes(-1, -2)
    return o, S, snapshots


def inputs(n, t, hk, hv, k_dim, v_dim, *, seed=0, dtype=np.float32, packed=False):
    """SPEC.md's test distributions: q ~ N(0,1), k L2-normalised, v ~ N(0,1),
    g = logsigmoid(N(0,1)), beta = sigmoid(N(0,1)); dense [N, T, ...] or packed [N*T, ...]."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, t, hk, k_dim))
    k = rng.standard_normal((n, t, hk, k_dim))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((n, t, hv, v_dim))
    g = -np.log1p(np.exp(-rng.standard_normal((n, t, hv))))
    beta = sigmoid(rng.standard_normal((n, t, hv)))
    arrays = [x.astype(dtype) for x in (q, k, v)] + [x.astype(np.float32) for x in (g, beta)]
    if packed:
        arrays = [x.reshape((n * t,) + x.shape[2:]) for x in arrays]
    return arrays


def random_state(n, hv, rows, cols, *, seed=1, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal((n, hv, rows, cols)) * 0.5).astype(dtype)
