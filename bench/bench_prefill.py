#!/usr/bin/env python3
"""Prefill benchmark: libgdn's cuda chunked kernel (through ctypes on libgdn.so) side by side
with flash-linear-attention's chunk_gated_delta_rule, in one process, on the same inputs
(BENCH.md "Cases"), both timed with CUDA events (triton's do_bench, median, L2 flushed).

    python3 bench/bench_prefill.py --lib build/lib/libgdn.so --out DIR [--cases NAME,...]
                                   [--deadline SECONDS] [--commit SHA]

Inputs (SPEC.md's distributions): bf16 q ~ N(0,1), k L2-normalised, v ~ N(0,1); f32
g = logsigmoid(N(0,1)) and beta = sigmoid(N(0,1)); f32 initial state (0.1 N(0,1)) in the vk
layout [N, Hv, V, K] (fla: state_v_first=True) and the final state written; K = V = 128.
Both libraries see the very same tensors.

Accuracy: relative L2 error of o and of the final state against a float64 evaluation of the
chunked form on the GPU (exact algebra, checked against the token recurrence in
bench/bench_prefill.py --self-test), on sampled value heads (the first and last) of the
longest sequence; fla's error on the same heads for reference.

Writes DIR/<date>-h200-prefill.json (BENCH.md "Results file") after every case and prints a
table last.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gdn_ctypes as gdn  # noqa: E402

K = V = 128
# 16 mixed lengths from 1 to 8192 tokens, 35509 in all (BENCH.md's varlen16 token count)
VARLEN16 = [1, 8192, 4096, 3000, 2500, 2048, 1999, 1536, 1500, 1200, 1024, 1000, 900, 777, 512, 5224]
# name, sequence lengths, Hk, Hv, packed (cu_seqlens)
CASES = [
    ("prefill-4x8192", [8192] * 4, 16, 32, False),
    ("prefill-16x4096", [4096] * 16, 16, 32, False),
    ("prefill-varlen16", VARLEN16, 16, 32, True),
    ("prefill-1x4096", [4096], 16, 32, False),
    ("prefill-1x16384", [16384], 16, 32, False),
    ("prefill-1x32768-hk2hv8", [32768], 2, 8, False),
    ("prefill-1x32768-hv64", [32768], 16, 64, False),
    ("prefill-1x65536", [65536], 16, 32, False),
]


# ---- the float64 reference: the chunked form, exact algebra (ALGORITHMS.md) ----------------
def oracle_f64(q, k, v, g, beta, h0, scale, C=64):
    """q, k [B, T, K]; v [B, T, V]; g (log-decay), beta [B, T]; h0 [B, V, K] (vk): float64.
    Returns o [B, T, V] and the final state [B, V, K]."""
    B, T, _ = q.shape
    S = h0.clone()
    o = torch.empty(B, T, v.shape[-1], dtype=torch.float64, device=q.device)
    for c0 in range(0, T, C):
        qc, kc, vc = q[:, c0:c0 + C], k[:, c0:c0 + C], v[:, c0:c0 + C]
        n = qc.shape[1]
        G = torch.cumsum(g[:, c0:c0 + C], 1)
        b = beta[:, c0:c0 + C]
        lower = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        mask = torch.where(lower, torch.exp((G[:, :, None] - G[:, None, :]).masked_fill(~lower, 0)), 0.0)
        L = (mask * (kc @ kc.transpose(1, 2))).tril(-1)
        A = torch.eye(n, dtype=torch.float64, device=q.device) + b[:, :, None] * L
        Tm = torch.linalg.solve_triangular(A, torch.diag_embed(b), upper=False, unitriangular=True)
        gam = torch.exp(G)[:, :, None]
        D = Tm @ vc - (Tm @ (gam * kc)) @ S.transpose(1, 2)         # D = U - W S^T
        o[:, c0:c0 + n] = scale * (gam * (qc @ S.transpose(1, 2)) + (mask * (qc @ kc.transpose(1, 2))) @ D)
        e = torch.exp(G[:, -1:] - G)[:, :, None]
        S = torch.exp(G[:, -1])[:, None, None] * S + D.transpose(1, 2) @ (e * kc)
    return o, S


def recurrence_f64(q, k, v, g, beta, h0, scale):
    """SPEC.md's token recurrence (slow; for the self-test)."""
    S = h0.clone()
    o = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64, device=q.device)
    for t in range(q.shape[1]):
        S = torch.exp(g[:, t])[:, None, None] * S
        d = beta[:, t, None] * (v[:, t] - (S @ k[:, t, :, None])[..., 0])
        S = S + d[:, :, None] * k[:, t, None, :]
        o[:, t] = scale * (S @ q[:, t, :, None])[..., 0]
    return o, S


def self_test():
    gen = torch.Generator().manual_seed(0)
    B, T = 2, 150
    q = torch.randn(B, T, K, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(B, T, K, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(B, T, V, generator=gen, dtype=torch.float64)
    g = F.logsigmoid(torch.randn(B, T, generator=gen, dtype=torch.float64))
    g[1] = -20 + torch.rand(T, generator=gen, dtype=torch.float64)  # fast decay
    beta = torch.sigmoid(torch.randn(B, T, generator=gen, dtype=torch.float64))
    h0 = 0.1 * torch.randn(B, V, K, generator=gen, dtype=torch.float64)
    o1, s1 = oracle_f64(q, k, v, g, beta, h0, K ** -0.5)
    o2, s2 = recurrence_f64(q, k, v, g, beta, h0, K ** -0.5)
    eo, es = rel(o1, o2), rel(s1, s2)
    print(f"self-test: chunked f64 vs recurrence f64: o {eo:.2e}, state {es:.2e}")
    assert eo < 1e-12 and es < 1e-12


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


# ---- inputs --------------------------------------------------------------------------------
def make_inputs(lengths, Hk, Hv, packed, gen, keys="spec", dtype=torch.bfloat16):
    """keys "spec": SPEC.md's (L2-normalised). keys "large": each key head's keys near one
    direction with norm 1.2 and the gates near 1 (g = logsigmoid(N(0,1) + 4)), so that most of
    the chunks' 16 x 16 diagonal blocks of beta K K^T (decayed) have an entry above 1 in size:
    the inputs that take the kernel's fallback substitution of those blocks (timing only; the
    recurrence stays bounded, 1 - beta |k|^2 > -0.44). keys "raw": q and k as drawn, not
    normalised, and both sides L2-normalise them in the kernel (ours qk_l2norm, the peer's
    use_qk_l2norm_in_kernel): Qwen3-Next's calls. keys "normed": SPEC.md's keys, and both sides
    L2-normalise q and k in the kernel as with "raw" (the same code path on normalised keys).
    dtype: q, k, v and o (bf16, or f32: drawn the same, then widened)."""
    dev = "cuda"
    N, T_total = len(lengths), sum(lengths)
    B, T = (1, T_total) if packed else (N, lengths[0])
    x = {}
    x["q"] = torch.randn(B, T, Hk, K, device=dev, generator=gen).bfloat16()
    if keys == "large":
        u = torch.randn(1, 1, Hk, K, device=dev, generator=gen)
        u = u / u.norm(dim=-1, keepdim=True)
        noise = 0.03 * torch.randn(B, T, Hk, K, device=dev, generator=gen)
        x["k"] = (1.2 * F.normalize(u + noise, dim=-1)).bfloat16()
    elif keys == "raw":
        x["k"] = torch.randn(B, T, Hk, K, device=dev, generator=gen).bfloat16()
    else:
        x["k"] = F.normalize(torch.randn(B, T, Hk, K, device=dev, generator=gen), dim=-1).bfloat16()
    x["l2norm"] = keys in ("raw", "normed")  # (both sides normalise q and k in the kernel)
    x["v"] = torch.randn(B, T, Hv, V, device=dev, generator=gen).bfloat16()
    shift = 4.0 if keys == "large" else 0.0
    x["g"] = F.logsigmoid(torch.randn(B, T, Hv, device=dev, generator=gen) + shift)
    x["beta"] = torch.sigmoid(torch.randn(B, T, Hv, device=dev, generator=gen))
    x["h0"] = 0.1 * torch.randn(N, Hv, V, K, device=dev, generator=gen)
    x["o"] = torch.empty(B, T, Hv, V, device=dev, dtype=torch.bfloat16)
    x["ht"] = torch.empty(N, Hv, V, K, device=dev)
    for name in ("q", "k", "v", "o"):
        x[name] = x[name].to(dtype)
    if packed:
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        x["cu32"] = torch.tensor(cu, dtype=torch.int32, device=dev)
        x["cu64"] = torch.tensor(cu, dtype=torch.int64, device=dev)
        x["cu_cpu"] = torch.tensor(cu, dtype=torch.int64)
    return x


def ours_args(lib, x, packed, checkpoint_every=0):
    """The call's arguments; with checkpoint_every > 0 also state checkpoints every
    checkpoint_every x 64 tokens into x["ckpt_pool"] at x["ckpt_idx"] (checkpoint_inputs)."""
    a = gdn.ForwardArgs()
    flat = (lambda t: t[0]) if packed else (lambda t: t)  # packed: [T_total, H, ...]
    a.q, a.k, a.v = gdn.tensor(flat(x["q"])), gdn.tensor(flat(x["k"])), gdn.tensor(flat(x["v"]))
    a.g, a.beta = gdn.tensor(flat(x["g"])), gdn.tensor(flat(x["beta"]))
    a.o = gdn.tensor(flat(x["o"]))
    a.initial_state, a.final_state = gdn.tensor(x["h0"]), gdn.tensor(x["ht"])
    if packed:
        a.cu_seqlens = gdn.tensor(x["cu32"])
    if checkpoint_every > 0:
        a.state_snapshots, a.snapshot_indices = gdn.tensor(x["ckpt_pool"]), gdn.tensor(flat(x["ckpt_idx"]))
        a.chunk_checkpoint_every = checkpoint_every
    a.state_layout = gdn.STATE_VK
    a.qk_l2norm = 1 if x["l2norm"] else 0
    a.backend, a.path = gdn.BACKEND_CUDA, gdn.PATH_CHUNKED
    return lib.prepare(a)


def checkpoint_inputs(x, lengths, packed, every):
    """A checkpoint pool (prefix caching): one f32 slot per checkpoint of every sequence (after
    each `every` x 64 tokens), in order; the other tokens' indices -1. Returns the slot of each
    sequence's last checkpoint (-1: none)."""
    tokens = every * gdn.CHECKPOINT_TOKENS
    B, T = x["o"].shape[:2]
    idx = torch.full((B, T), -1, dtype=torch.int32)
    slot, last = 0, []
    for n, length in enumerate(lengths):
        row, base = (0, sum(lengths[:n])) if packed else (n, 0)
        last.append(-1)
        for t in range(tokens - 1, length, tokens):
            idx[row, base + t] = slot
            last[-1] = slot
            slot += 1
    Hv = x["v"].shape[2]
    x["ckpt_pool"] = torch.empty(max(slot, 1), Hv, V, K, device="cuda")
    x["ckpt_idx"] = idx.cuda()
    return last


def peer_call(fla_fn, x, packed):
    kw = dict(scale=K ** -0.5, initial_state=x["h0"], output_final_state=True, state_v_first=True)
    if x["l2norm"]:
        kw["use_qk_l2norm_in_kernel"] = True
    if packed:
        kw.update(cu_seqlens=x["cu64"], cu_seqlens_cpu=x["cu_cpu"])
    return lambda: fla_fn(x["q"], x["k"], x["v"], x["g"], x["beta"], **kw)


# ---- accuracy on sampled heads ----------------------------------------------------------------
def sampled_errors(x, lengths, Hk, Hv, packed, o, ht):
    """rel L2 of o and the final state against oracle_f64 on value heads {0, Hv - 1} of the
    longest sequence (with x["l2norm"], on q and k L2-normalised in f64 first, eps 1e-6 as SPEC.md)."""
    n = max(range(len(lengths)), key=lambda i: lengths[i])
    t0 = sum(lengths[:n]) if packed else 0
    T = lengths[n]
    b = 0 if packed else n
    heads = sorted({0, Hv - 1})
    r = Hv // Hk
    sel = lambda t, idx: torch.stack([t[b, t0:t0 + T, i] for i in idx]).double()  # noqa: E731
    q, k = sel(x["q"], [h // r for h in heads]), sel(x["k"], [h // r for h in heads])
    if x["l2norm"]:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    v, g, beta = sel(x["v"], heads), sel(x["g"], heads), sel(x["beta"], heads)
    h0 = torch.stack([x["h0"][n, h] for h in heads]).double()
    o_ref, s_ref = oracle_f64(q, k, v, g, beta, h0, K ** -0.5)
    o_got = sel(o, heads)
    s_got = torch.stack([ht[n, h] for h in heads]).double()
    return rel(o_got, o_ref), rel(s_got, s_ref)


# ---- where path auto should switch: our recurrent kernel against our chunked one -------------
def crossover(lib, gen, rep, dtype=torch.bfloat16):
    """ms of path recurrent and path chunked for N = 32 sequences of T tokens (Hk 16, Hv 32)."""
    import triton.testing
    rows = []
    Ts = (8, 16, 32, 48, 64, 96, 128, 256) + ((512, 1024) if dtype == torch.float32 else ())
    for T in Ts:
        x = make_inputs([T] * 32, 16, 32, False, gen, dtype=dtype)
        row = {"T": T, "N": 32}
        for path, name in ((gdn.PATH_RECURRENT, "recurrent_ms"), (gdn.PATH_CHUNKED, "chunked_ms")):
            a = ours_args(lib, x, False)
            a.path = path
            row[name] = triton.testing.do_bench(lambda: lib.forward(a), warmup=5, rep=rep, return_mode="median")
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


# ---- the run ------------------------------------------------------------------------------------
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/lib/libgdn.so")
    ap.add_argument("--out", default=".")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--deadline", type=float, default=0, help="seconds; cases not started by then are skipped")
    ap.add_argument("--commit", default=os.environ.get("GDN_COMMIT", ""))
    ap.add_argument("--rep", type=int, default=60, help="do_bench rep (ms)")
    ap.add_argument("--no-peer", action="store_true", help="time ours only (e.g. under a profiler)")
    ap.add_argument("--crossover", action="store_true", help="also time path recurrent vs chunked at short T")
    ap.add_argument("--forms", default="", help="also time these forms of ours, e.g. fused,split,split:1,split:1:0 "
                    "(GDN_CHUNKED_FORM[:GDN_CHUNKED_SEGMENTS[:GDN_CHUNKED_WINDOWS]]; ours_ms is the library's "
                    "own choice)")
    ap.add_argument("--checkpoints", type=int, default=0, help="also time ours with state checkpoints every N x 64 "
                    "tokens into a pool (ckpt_ms; ckpt_err_state: the last checkpoint of a sequence that ends on "
                    "one against the final state)")
    ap.add_argument("--keys", default=os.environ.get("GDN_BENCH_KEYS", "spec"), choices=["spec", "large", "raw", "normed"],
                    help="spec: SPEC.md's inputs; large: keys of norm 1.2 near one direction and gates near 1, "
                    "so the diagonal blocks take the fallback substitution; raw: q and k not normalised, both sides "
                    "normalising them in the kernel (results file -raw-keys); normed: SPEC.md's keys, normalised "
                    "in the kernel again as with raw (default $GDN_BENCH_KEYS or spec)")
    ap.add_argument("--inputs", default="bf16", choices=["bf16", "f32"],
                    help="q, k, v and o dtype (f32: the same draws widened; results file -f32-inputs)")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    start = time.time()
    import triton.testing

    lib = gdn.Gdn(args.lib)
    try:
        if args.no_peer:
            raise ImportError("--no-peer")
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_fn
        try:
            from importlib.metadata import version
            fla_version = version("fla-core")
        except Exception:  # noqa: BLE001
            fla_version = "unknown"
    except Exception as e:  # noqa: BLE001
        print(f"fla unavailable ({e}): peer columns stay empty")
        fla_fn, fla_version = None, None

    date = datetime.date.today().isoformat()
    result = {
        "date": date, "gpu": torch.cuda.get_device_name(),
        "driver": sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader").split("\n")[0],
        "commit": args.commit or sh("git rev-parse --short HEAD") or "unknown",
        "peer": {"name": "fla-core chunk_gated_delta_rule", "version": fla_version},
        "ours": {"name": "gdn cuda chunked", "version": lib.version()},
        "cases": [],
    }
    os.makedirs(args.out, exist_ok=True)
    suffix = "" if args.keys == "spec" else f"-{args.keys}-keys"  # (the main table's file stays SPEC.md's inputs)
    suffix += "-f32-inputs" if args.inputs == "f32" else ""
    dtype = torch.float32 if args.inputs == "f32" else torch.bfloat16
    path = os.path.join(args.out, f"{date}-h200-prefill{suffix}.json")
    wanted = set(filter(None, args.cases.split(",")))
    gen = torch.Generator(device="cuda").manual_seed(1234)
    for name, lengths, Hk, Hv, packed in CASES:
        if wanted and name not in wanted:
            continue
        if args.deadline and time.time() - start > args.deadline:
            print(f"{name}: skipped (deadline)", flush=True)
            continue
        row = {"name": name, "timing": "events", "N": len(lengths), "T_total": sum(lengths), "Hk": Hk, "Hv": Hv}
        if args.inputs != "bf16":
            row["inputs"] = args.inputs
        if args.keys != "spec":
            row["keys"] = args.keys
        try:
            x = make_inputs(lengths, Hk, Hv, packed, gen, args.keys, dtype)
            a = ours_args(lib, x, packed)
            ours = lambda: lib.forward(a)  # noqa: E731
            ours()
            torch.cuda.synchronize()
            row["rel_err_o"], row["rel_err_state"] = sampled_errors(x, lengths, Hk, Hv, packed, x["o"], x["ht"])
            row["ours_ms"] = triton.testing.do_bench(ours, warmup=10, rep=args.rep, return_mode="median")
            row["tokens_per_s"] = sum(lengths) / (row["ours_ms"] * 1e-3)
            for form in filter(None, args.forms.split(",")):
                os.environ["GDN_CHUNKED_FORM"], _, rest = form.partition(":")
                segments, _, windows = rest.partition(":")
                if segments:
                    os.environ["GDN_CHUNKED_SEGMENTS"] = segments
                if windows:
                    os.environ["GDN_CHUNKED_WINDOWS"] = windows
                try:
                    af = ours_args(lib, x, packed)
                    x["o"].fill_(float("nan"))
                    lib.forward(af)
                    torch.cuda.synchronize()
                    row[f"rel_err_o_{form}"], row[f"rel_err_state_{form}"] = sampled_errors(
                        x, lengths, Hk, Hv, packed, x["o"], x["ht"])
                    row[f"{form}_ms"] = triton.testing.do_bench(lambda: lib.forward(af), warmup=10, rep=args.rep,
                                                                return_mode="median")
                finally:
                    os.environ.pop("GDN_CHUNKED_FORM", None)
                    os.environ.pop("GDN_CHUNKED_SEGMENTS", None)
                    os.environ.pop("GDN_CHUNKED_WINDOWS", None)
            if args.checkpoints > 0:
                last = checkpoint_inputs(x, lengths, packed, args.checkpoints)
                ac = ours_args(lib, x, packed, args.checkpoints)
                x["ckpt_pool"].fill_(float("nan"))
                lib.forward(ac)
                torch.cuda.synchronize()
                ends = [n for n, length in enumerate(lengths)
                        if last[n] >= 0 and length % (args.checkpoints * gdn.CHECKPOINT_TOKENS) == 0]
                row["ckpt_every"] = args.checkpoints
                row["ckpt_err_state"] = max((rel(x["ckpt_pool"][last[n]], x["ht"][n]) for n in ends), default=None)
                row["ckpt_ms"] = triton.testing.do_bench(lambda: lib.forward(ac), warmup=10, rep=args.rep,
                                                         return_mode="median")
            row["peer_ms"] = None
            if fla_fn is not None:
                peer = peer_call(fla_fn, x, packed)
                o_p, ht_p = peer()
                torch.cuda.synchronize()
                row["peer_rel_err_o"], row["peer_rel_err_state"] = sampled_errors(
                    x, lengths, Hk, Hv, packed, o_p, ht_p)
                row["rel_diff_to_peer_o"] = rel(x["o"], o_p)
                row["peer_ms"] = triton.testing.do_bench(peer, warmup=10, rep=args.rep, return_mode="median")
                row["ratio"] = row["ours_ms"] / row["peer_ms"]
            del x
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"
        torch.cuda.empty_cache()
        result["cases"].append(row)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(row), flush=True)

    if args.crossover and not (args.deadline and time.time() - start > args.deadline + 30):
        result["crossover"] = crossover(lib, gen, 20, dtype)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)

    print(f"\nresults: {path}  (gpu {result['gpu']}, driver {result['driver']}, fla {fla_version})")
    hdr = f"{'case':26s} {'ours ms':>8s} {'fla ms':>8s} {'ours/fla':>8s} {'speedup':>7s} {'Mtok/s':>7s} " \
          f"{'err o':>8s} {'err S':>8s} {'fla o':>8s} {'fla S':>8s}"
    print(hdr)
    for r in result["cases"]:
        if "error" in r:
            print(f"{r['name']:26s} ERROR {r['error']}")
            continue
        f = lambda k, fmt: (fmt % r[k]) if r.get(k) is not None else "-"  # noqa: E731
        speed = f"{r['peer_ms'] / r['ours_ms']:.2f}x" if r.get("peer_ms") else "-"
        print(f"{r['name']:26s} {f('ours_ms', '%8.3f')} {f('peer_ms', '%8.3f')} {f('ratio', '%8.3f')} "
              f"{speed:>7s} {r['tokens_per_s'] / 1e6:7.1f} {f('rel_err_o', '%8.2e')} {f('rel_err_state', '%8.2e')} "
              f"{f('peer_rel_err_o', '%8.2e')} {f('peer_rel_err_state', '%8.2e')}")
    forms = list(filter(None, args.forms.split(",")))
    for r in result["cases"]:
        if forms and "error" not in r:
            print(f"{r['name']:26s} " + "  ".join(
                f"{fm} {r.get(fm + '_ms', float('nan')):.3f} ms (o {r.get('rel_err_o_' + fm, float('nan')):.2e}, "
                f"S {r.get('rel_err_state_' + fm, float('nan')):.2e})" for fm in forms))
    for r in result["cases"]:
        if r.get("ckpt_ms") is not None:
            err = r.get("ckpt_err_state")
            print(f"{r['name']:26s} checkpoints every {r['ckpt_every'] * gdn.CHECKPOINT_TOKENS} tokens: "
                  f"{r['ckpt_ms']:.3f} ms against {r['ours_ms']:.3f} without "
                  f"(last checkpoint against the final state {'-' if err is None else f'{err:.1e}'})")
    for r in result.get("crossover", []):
        print(f"crossover N=32 T={r['T']:4d}: recurrent {r['recurrent_ms']:.3f} ms, chunked {r['chunked_ms']:.3f} ms")


if __name__ == "__main__":
    main()
