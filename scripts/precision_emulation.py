#!/usr/bin/env python3
"""The chunked form's roundings emulated in f64 (numpy), against the token-by-token recurrence.

Each computed operand of the chunked form can be kept exact (f32 or a bf16 hi + lo pair, whose
16 significant bits are exact at this scale) or rounded once to bf16 or f16 where it enters a
product; inputs are bf16 (q ~ N(0,1), k L2-normalised, v ~ N(0,1), beta = sigmoid(N(0,1))) and
o is rounded to bf16 at the end, as the kernels do. Plans:
  pairs   the one-role fused kernel and the split form off sm_90a: -W and Xw bf16, S bf16 in
          S Qc^T only, every other computed operand as pairs;
  f16     the warp-specialised kernel and the split form on sm_90a: as pairs, but -W, S (in
          S (-W)^T), P and D (in D^T P^T) in f16, and the inverse's merges with f16 operands;
  f16+U16 as f16, with U = T Vc rounded to f16 too (the split form's prepared U in f16: half
          its bytes; not taken: the state's error with decay 2.2e-4 against 1.5e-10, o unchanged);
  f16+T16 as f16, with T rounded once to f16 in U = T Vc (one product where the kernels take T
          as a hi + lo pair: two);
  f16+D16 as f16, with D rounded once to f16 in the state update (one product where the
          kernels take D as a pair);
  f16+dg16 as f16, the 16 x 16 diagonal blocks of the inverse by the f16 doubling product
          (invert_diagonal_blocks_doubling) where |m| <= 1, else the substitution (exact here);
  f16+dg16g as f16+dg16, and a block whose powers L^2, L^4, L^8 pass 2 substituted too (the
          kernels since the forty-fifth session, the one-head prepare kernel since the fifty-first);
  f16+dg16x2 as f16+dg16, every operand of the doubling an f16 hi + lo pair (three products each,
          no check): the substitution's errors without it (measured and not taken: the one-head
          prepare kernel 10% slower, against the check's 6%);
  f16+ahead as f16, with the chain looking one chunk ahead (docs/NOTES.md, forty-fifth session):
          D_c = U_c - gamma_{c-1} W_c S_{c-1}^T - Z_c D_{c-1}, Z_c = W_c Kc~_{c-1}^T (Kc~: the keys
          decayed to the chunk's end), S_{c-1}, Z_c and D_{c-1} rounded to f16 there;
  bf16    every computed operand in bf16 (the peer's plan).
Prints the relative L2 error of o and of the final state against the recurrence for each decay
regime (g = logsigmoid(N(0,1)), none, near -20). Usage: precision_emulation.py [T] [seed] [io]
[keys], io the inputs' and o's type: bf16 (the default) or f16 (the products' roundings then show
beside o's own, which is 8 times smaller); keys: spec (independent, normalised: the default),
shared (normalised, along one direction with noise 0.03 an element: pairwise cosine about 0.9;
the gates then x 0.02), large (as shared, of norm 1.2: Range.LargeKeysTakeTheFallbackSubstitution's).
"""
import sys

import numpy as np


def bf16(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def f16(x):
    return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)


def f32(x):
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def PAIR(x):  # (the diagonal blocks' doubling with f16 hi + lo operands: diagonal_inverse)
    return x


ROUND = {"b": bf16, "h": f16, "h2": PAIR}
PLANS = {
    "pairs": {"W": "b", "Xw": "b", "S_qs": "b"},
    "f16": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h"},
    "f16+U16": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "U": "h"},
    "f16+T16": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "T": "h"},
    "f16+D16": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "D_up": "h"},
    "f16+dg16": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "diag": "h"},
    "f16+dg16g": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "diag": "h",
                  "diag_limit": 2.0},
    "f16+dg16x2": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "diag": "h2"},
    "f16+ahead": {"W": "h", "Xw": "b", "S_qs": "b", "S_ws": "h", "P": "h", "D_pd": "h", "merge": "h", "ahead": "h"},
    "bf16": {n: "b" for n in ["W", "Xw", "S_qs", "S_ws", "P", "D_pd", "D_up", "T"]},
}


def inputs(T, K, V, regime, rng, io, keys="spec"):
    q = io(rng.standard_normal((T, K)))
    if keys == "spec":
        k = rng.standard_normal((T, K))
    else:
        u = rng.standard_normal(K)
        k = u / np.linalg.norm(u) + 0.03 * rng.standard_normal((T, K))
    k = io((1.2 if keys == "large" else 1.0) * k / np.linalg.norm(k, axis=1, keepdims=True))
    v = io(rng.standard_normal((T, V)))
    g = {"normal": -np.log1p(np.exp(-rng.standard_normal(T))), "none": np.zeros(T),
         "fast": -20 + 0.1 * rng.standard_normal(T)}[regime]
    if keys != "spec":
        g = 0.02 * g
    beta = 1 / (1 + np.exp(-rng.standard_normal(T)))
    return q, k, v, f32(g), f32(beta)


def recurrent(q, k, v, g, beta, scale):
    S = np.zeros((v.shape[1], q.shape[1]))
    o = np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        S *= np.exp(g[t])
        S += np.outer(beta[t] * (v[t] - S @ k[t]), k[t])
        o[t] = scale * S @ q[t]
    return o, S


def diagonal_inverse(L, rnd, limit=None):
    """(I + L)^-1 of a strictly lower 16 x 16 block: exact (rnd None, or an entry of L above 1,
    or with `limit` an entry of a power above it: the kernels' substitution), or by the doubling
    product (I - L)(I + L^2)(I + L^4)(I + L^8) (L^16 = 0) with each product's operands rounded
    by rnd and f32 sums, as tensor-core products would form it."""
    if rnd is None or np.abs(L).max() > 1:
        return f32(np.linalg.inv(np.eye(16) + L))
    I = np.eye(16)
    mul = lambda a, b: f32(rnd(a) @ rnd(b))
    if rnd is PAIR:  # each operand a hi + lo f16 pair, lo x lo left out: three products, f32 sums
        hl = lambda a: (f16(a), f16(a - f16(a)))
        mul = lambda a, b: f32(hl(a)[0] @ hl(b)[0] + hl(a)[0] @ hl(b)[1] + hl(a)[1] @ hl(b)[0])
    L2 = mul(L, L)
    L4 = mul(L2, L2)
    L8 = mul(L4, L4)
    if limit is not None and max(np.abs(L2).max(), np.abs(L4).max(), np.abs(L8).max()) > limit:
        return f32(np.linalg.inv(np.eye(16) + L))
    X = I - L
    for Lp in (L2, L4, L8):
        X = mul(X, I + Lp)
    return X


def inverse(m, rnd, diag=None, limit=None):
    """(I + m)^-1 by 16 x 16 diagonal blocks and two levels of merges, the merges' operands rounded."""
    n = m.shape[0]
    if n < 64:
        return f32(np.linalg.inv(np.eye(n) + m))
    X = np.zeros((64, 64))
    for b in range(4):
        s = slice(16 * b, 16 * b + 16)
        X[s, s] = diagonal_inverse(m[s, s], diag, limit)
    for i, j in [(1, 0), (3, 2)]:
        si, sj = slice(16 * i, 16 * i + 16), slice(16 * j, 16 * j + 16)
        X[si, sj] = -(rnd(rnd(X[si, si]) @ rnd(m[si, sj])) @ rnd(X[sj, sj]))
    A, B = slice(0, 32), slice(32, 64)
    X[B, A] = -(rnd(rnd(X[B, B]) @ rnd(m[B, A])) @ rnd(X[A, A]))
    return f32(X)


def chunked(q, k, v, g, beta, scale, plan, io, C=64):
    r = lambda name, x: ROUND[plan[name]](x) if name in plan else x
    S = np.zeros((v.shape[1], q.shape[1]))
    o = np.zeros((q.shape[0], v.shape[1]))
    prev = None  # the look-ahead's (S, D, Kc~, gamma) of the chunk before
    for c0 in range(0, q.shape[0], C):
        Q, Kc, Vc = q[c0:c0 + C], k[c0:c0 + C], v[c0:c0 + C]
        G = np.cumsum(g[c0:c0 + C])
        b = beta[c0:c0 + C]
        mask = np.tril(np.exp(np.minimum(G[:, None] - G[None, :], 0)))
        m = np.tril(b[:, None] * (Kc @ Kc.T), -1)
        X = inverse(m, ROUND[plan["merge"]] if "merge" in plan else (lambda x: x),
                    ROUND[plan["diag"]] if "diag" in plan else None, plan.get("diag_limit"))
        W = r("W", np.exp(G)[:, None] * (r("Xw", X * b[None, :]) @ Kc))
        U = r("U", r("T", mask * X * b[None, :]) @ Vc)
        if "ahead" in plan and prev is not None:
            S_p, D_p, Kt_p, gamma_p = prev
            Z = r("ahead", W @ Kt_p.T)
            D = U - gamma_p * f32(W @ r("ahead", S_p).T) - f32(Z @ r("ahead", D_p))
        else:
            D = U - W @ r("S_ws", S).T
        P = r("P", scale * mask * (Q @ Kc.T))
        o[c0:c0 + C] = io(scale * np.exp(G)[:, None] * (Q @ r("S_qs", S).T) + P @ r("D_pd", D))
        Kt = np.exp(G[-1] - G)[:, None] * Kc
        prev = (S, D, Kt, np.exp(G[-1]))
        S = np.exp(G[-1]) * S + (r("D_up", D) * np.exp(G[-1] - G)[:, None]).T @ Kc
    return o, S


def main():
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    io = {"bf16": bf16, "f16": f16}[sys.argv[3] if len(sys.argv) > 3 else "bf16"]
    keys = sys.argv[4] if len(sys.argv) > 4 else "spec"
    rel = lambda x, ref: np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"T = {T}, K = V = 128, seed {seed}, {io.__name__} inputs and o, {keys} keys: relative L2 "
          "error against the recurrence")
    print(f"{'decay':8s} {'plan':7s} {'o':>9s} {'state':>9s}")
    for regime in ["normal", "none", "fast"]:
        q, k, v, g, beta = inputs(T, 128, 128, regime, np.random.default_rng(seed), io, keys)
        o_ref, S_ref = recurrent(q, k, v, g, beta, 128 ** -0.5)
        for name, plan in PLANS.items():
            o, S = chunked(q, k, v, g, beta, 128 ** -0.5, plan, io)
            print(f"{regime:8s} {name:7s} {rel(o, o_ref):9.2e} {rel(S, S_ref):9.2e}")


if __name__ == "__main__":
    main()
