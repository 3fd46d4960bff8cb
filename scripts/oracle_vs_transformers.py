#!/usr/bin/env python3
"""Checks gdn's f64 oracle against an independent reference: the Hugging Face `transformers`
Qwen3-Next torch functions `torch_recurrent_gated_delta_rule` and `torch_chunk_gated_delta_rule`.

The oracle runs through the `gdn` tool (`gdn run --backend reference`) on safetensors files
written here by torch, so the check also covers the tool's file path. The transformers bodies
are taken through `__wrapped__` (their decorator dispatches to flash-linear-attention whenever
it is importable) and are fed float64 tensors; they compute in float32, so agreement is about
1e-6 relative, not 1e-12.

Conventions bridged: transformers' state is kv ([N, Hv, K, V]) where ours is vk by default;
its functions need one key head per value head, so q and k are repeated per value head in the
order of the head map (block: repeat_interleave; tiled: repeat); it has no packed batches, so a
packed batch is run one sequence at a time.

Usage: oracle_vs_transformers.py --gdn PATH/TO/gdn [--json OUT.json]
Exit status 1 if any case exceeds the bound.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers.models.qwen3_next import modeling_qwen3_next as hf

BOUND = 1e-5  # f32 reference against an f64 oracle


def unwrap(fn):
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


HF_RECURRENT = unwrap(hf.torch_recurrent_gated_delta_rule)
HF_CHUNK = unwrap(hf.torch_chunk_gated_delta_rule)


def rel(x, ref):
    return float((x - ref).norm() / ref.norm())


def make_inputs(gen, lens, Hk, Hv, K, V):
    """SPEC.md's realistic distributions, packed [T_total, H, D] (float64)."""
    T_total = sum(lens)
    f = dict(dtype=torch.float64, generator=gen)
    q = torch.randn(T_total, Hk, K, **f)
    k = torch.nn.functional.normalize(torch.randn(T_total, Hk, K, **f), dim=-1)
    v = torch.randn(T_total, Hv, V, **f)
    g = torch.nn.functional.logsigmoid(torch.randn(T_total, Hv, **f))
    beta = torch.sigmoid(torch.randn(T_total, Hv, **f))
    h0 = 0.1 * torch.randn(len(lens), Hv, V, K, **f)  # vk
    return q, k, v, g, beta, h0


def run_gdn(gdn, tensors, head_map, packed):
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        save_file({n: t.contiguous() for n, t in tensors.items()}, fin)
        cmd = [gdn, "run", "--in", fin, "--out", fout, "--backend", "reference", "--head-map", head_map]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out = load_file(fout)
    return out["o"], out["final_state"]


def run_hf(fn, q, k, v, g, beta, h0, lens, ratio, head_map):
    """One sequence at a time; returns o [T_total, Hv, V] and final state [N, Hv, V, K] (vk)."""
    os_, states, start = [], [], 0
    for n, L in enumerate(lens):
        sl = slice(start, start + L)
        start += L
        if L == 0:
            states.append(h0[n])
            continue
        expand = (lambda x: x.repeat_interleave(ratio, dim=2)) if head_map == "block" else (lambda x: x.repeat(1, 1, ratio, 1))
        qn, kn = expand(q[sl][None]), expand(k[sl][None])
        o, s = fn(qn, kn, v[sl][None], g=g[sl][None], beta=beta[sl][None],
                  initial_state=h0[n:n + 1].transpose(-1, -2), output_final_state=True)
        os_.append(o[0])
        states.append(s[0].transpose(-1, -2))
    return torch.cat(os_), torch.stack(states)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gdn", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(2026)
    K = V = 32
    cases = []
    for ratio in (1, 2, 3):
        for head_map in ("block", "tiled"):
            cases.append(dict(name=f"dense-r{ratio}-{head_map}", lens=[70, 70], Hk=2, ratio=ratio, head_map=head_map, packed=False))
            cases.append(dict(name=f"packed-r{ratio}-{head_map}", lens=[5, 0, 131, 64], Hk=2, ratio=ratio, head_map=head_map, packed=True))
    rows, ok = [], True
    for c in cases:
        Hk, r = c["Hk"], c["ratio"]
        Hv = Hk * r
        q, k, v, g, beta, h0 = make_inputs(gen, c["lens"], Hk, Hv, K, V)
        N = len(c["lens"])
        if c["packed"]:
            cu = torch.tensor([0] + list(torch.tensor(c["lens"]).cumsum(0)), dtype=torch.int32)
            tensors = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, cu_seqlens=cu)
        else:
            T = c["lens"][0]
            tensors = dict(q=q.view(N, T, Hk, K), k=k.view(N, T, Hk, K), v=v.view(N, T, Hv, V),
                           g=g.view(N, T, Hv), beta=beta.view(N, T, Hv), initial_state=h0)
        o_gdn, s_gdn = run_gdn(args.gdn, tensors, c["head_map"], c["packed"])
        o_gdn = o_gdn.reshape(-1, Hv, V).double()
        s_gdn = s_gdn.double()
        row = dict(name=c["name"])
        for label, fn in (("recurrent", HF_RECURRENT), ("chunk", HF_CHUNK)):
            o_ref, s_ref = run_hf(fn, q, k, v, g, beta, h0, c["lens"], r, c["head_map"])
            row[f"o_vs_{label}"] = rel(o_gdn, o_ref.double())
            row[f"state_vs_{label}"] = rel(s_gdn, s_ref.double())
        row["pass"] = all(val <= BOUND for key, val in row.items() if key.endswith(("recurrent", "chunk")))
        if r > 1:  # negative control: the other head order must disagree, or the check is blind
            other = "tiled" if c["head_map"] == "block" else "block"
            o_wrong, _ = run_hf(HF_RECURRENT, q, k, v, g, beta, h0, c["lens"], r, other)
            row["o_vs_wrong_map"] = rel(o_gdn, o_wrong.double())
            row["pass"] &= row["o_vs_wrong_map"] > 1e-2
        ok &= row["pass"]
        rows.append(row)

    print(f"{'case':22} {'o/recurrent':>12} {'S/recurrent':>12} {'o/chunk':>12} {'S/chunk':>12} {'o/wrong map':>12}  result")
    for r_ in rows:
        wrong = f"{r_['o_vs_wrong_map']:12.2e}" if "o_vs_wrong_map" in r_ else f"{'-':>12}"
        print(f"{r_['name']:22} {r_['o_vs_recurrent']:12.2e} {r_['state_vs_recurrent']:12.2e} "
              f"{r_['o_vs_chunk']:12.2e} {r_['state_vs_chunk']:12.2e} {wrong}  {'PASS' if r_['pass'] else 'FAIL'}")
    worst = max(max(v for k_, v in r_.items() if k_.endswith(("recurrent", "chunk"))) for r_ in rows)
    print(f"max relative L2 error over all cases: {worst:.2e} (bound {BOUND:.0e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(torch=torch.__version__, transformers=__import__("transformers").__version__,
                           bound=BOUND, cases=rows), f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
