#!/usr/bin/env python3
"""Decode and speculative-verify benchmark: libgdn's cuda recurrent kernel (through ctypes on
libgdn.so) side by side with flash-linear-attention's fused_recurrent_gated_delta_rule, in one
process, on the same inputs, both timed inside CUDA graphs (BENCH.md).

    python3 bench/bench_decode.py --lib build-cuda/lib/libgdn.so --out DIR

Cases (BENCH.md): Hk=16, Hv=32, K=V=128, bf16 q/k/v, f32 g/beta, B in {1,16,64,256,1024}:
decode-B{B}-vk, decode-B{B}-kv (f32 state), decode-B{B}-vk-bf16state, verify-B64-T4 (per-token
states), decode-B1-vk-plain (one plain launch per step: the host cost), and
decode-B256-vk-serving (raw gate + q/k L2 norm + beta logit + state pool, in place), and
decode-B{B}-vk-outofplace (the final state to its own buffer, as fla writes it: BENCH.md's case,
"initial and final state on"; decode-B{B}-vk updates the state in place); beside them
decode-B{1,16}-vk-warm (one input set: the state stays in the L2), the -genericform cases (the
generic one-token kernel), the -noearly cases (no programmatic dependent launch) and others
named in decode_cases().

Timing: many steps captured in one graph, rotating over enough input sets that the state
traffic is several times the 60 MB L2 (except the -warm cases); replays timed with CUDA events;
the median per step.
State GB/s counts the bytes of state read and written (final state and snapshots).
Writes DIR/<date>-h200-decode.json (BENCH.md "Results file") and prints a table last.
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import zlib

import torch
import torch.nn.functional as F

HK, HV, K, V = 16, 32, 128, 128
L2_BYTES = 60 * 2**20
COPY_CEILING_GBPS = 4255.0

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gdn_ctypes as gc  # noqa: E402  (the C API through ctypes)

STATE_VK, STATE_KV = gc.STATE_VK, gc.STATE_KV


def decode_args(x, layout, inplace=True, serving=False, snapshots=None, flags=None):
    """gdn_forward_args for the tensors of one input set `x` (make_inputs), path recurrent."""
    a = gc.ForwardArgs()
    a.q, a.k, a.v, a.beta, a.o = (gc.tensor(x[n]) for n in ("q", "k", "v", "beta", "o"))
    a.initial_state = gc.tensor(x["state"])
    a.final_state = gc.tensor(x["state"] if inplace else x["state_out"])
    if serving:
        a.a, a.A_log, a.dt_bias = gc.tensor(x["a"]), gc.tensor(x["A_log"]), gc.tensor(x["dt_bias"])
        a.state_indices = gc.tensor(x["state_indices"])
        a.gate, a.beta_mode, a.qk_l2norm = gc.GATE_RAW, gc.BETA_LOGIT, 1
    else:
        a.g = gc.tensor(x["g"])
    if snapshots is not None:
        a.state_snapshots = gc.tensor(snapshots)
    a.state_layout = layout
    a.backend, a.path = gc.BACKEND_CUDA, gc.PATH_RECURRENT
    if flags is not None:
        a.error_flags = flags.data_ptr()
    return a


def gdn_step(gdn, a):
    """One call on torch's current stream (the capture stream inside a graph); no workspace."""
    a.stream = torch.cuda.current_stream().cuda_stream
    gdn.forward(a)


# ---- inputs (SPEC.md's distributions) -------------------------------------------------------
def make_inputs(B, T, layout, sdtype, serving=False, state_out=False, gen=None, in_dtype=torch.bfloat16):
    dev = "cuda"
    x = {}
    q = torch.randn(B, T, HK, K, device=dev, generator=gen)
    k = torch.randn(B, T, HK, K, device=dev, generator=gen)
    if not serving:  # the kernel normalises in the serving case
        k = F.normalize(k, dim=-1)
    x["q"], x["k"] = q.to(in_dtype), k.to(in_dtype)
    x["v"] = torch.randn(B, T, HV, V, device=dev, generator=gen).to(in_dtype)
    x["o"] = torch.empty(B, T, HV, V, device=dev, dtype=in_dtype)
    b = torch.randn(B, T, HV, device=dev, generator=gen)
    if serving:
        x["beta"] = b  # logit
        x["a"] = torch.randn(B, T, HV, device=dev, generator=gen)
        x["A_log"] = torch.log(torch.empty(HV, device=dev).uniform_(1, 16, generator=gen))
        x["dt_bias"] = torch.randn(HV, device=dev, generator=gen) * 0.5
        P = B + max(1, B // 8)
        x["state_indices"] = torch.randperm(P, device=dev, generator=gen)[:B].to(torch.int32)
        slots = P
    else:
        x["beta"] = torch.sigmoid(b)
        x["g"] = F.logsigmoid(torch.randn(B, T, HV, device=dev, generator=gen))
        slots = B
    shape = (slots, HV, V, K) if layout == STATE_VK else (slots, HV, K, V)
    x["state"] = (torch.randn(*shape, device=dev, generator=gen) * 0.1).to(sdtype)
    if state_out:
        x["state_out"] = torch.empty_like(x["state"])
    return x


def set_bytes(x):
    return sum(t.numel() * t.element_size() for t in x.values() if torch.is_tensor(t))


def sets_needed(B, T, layout, sdtype, serving=False):
    """Input sets to rotate over so that one pass touches >= 4x the L2."""
    state = B * HV * K * V * torch.tensor([], dtype=sdtype).element_size()
    return max(1, min(128, math.ceil(4 * L2_BYTES / state)))


# ---- timing ---------------------------------------------------------------------------------
def time_graph(steps, replays=20):
    """Median ms per step of `steps` (callables) captured in one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in steps[: min(3, len(steps))]:
            f()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for f in steps:
            f()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / len(steps))
    del graph
    return statistics.median(times)


def time_plain(step, calls=2000):
    """ms per call of `step` launched plainly, back to back: CUDA events around the loop, so
    the time is the host's issue rate (launch cost included) unless the GPU is slower."""
    for _ in range(50):
        step()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(calls):
        step()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / calls


def rel_l2(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


# ---- the peer -------------------------------------------------------------------------------
def load_peer():
    try:
        import fla
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
        return fused_recurrent_gated_delta_rule, f"flash-linear-attention (fla-core) {fla.__version__}"
    except Exception as e:  # noqa: BLE001
        print(f"peer unavailable: {e!r}", file=sys.stderr)
        return None, "flash-linear-attention: unavailable"


def peer_step(fla_fn, x, layout, serving=False):
    kw = dict(initial_state=x["state"], output_final_state=True, state_v_first=(layout == STATE_VK))
    if serving:
        state = x["state"][: x["q"].shape[0]]  # fla has no pool: a dense state of the same size
        kw.update(initial_state=state, use_gate_in_kernel=True, A_log=x["A_log"], dt_bias=x["dt_bias"],
                  use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        return lambda: fla_fn(x["q"], x["k"], x["v"], g=x["a"], beta=x["beta"], **kw)
    return lambda: fla_fn(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"], **kw)


# ---- cases ----------------------------------------------------------------------------------
def state_traffic(B, T, sdtype, snapshots):
    per = B * HV * K * V * torch.tensor([], dtype=sdtype).element_size()
    return per * (2 + (T if snapshots else 0))


def run_case(gdn, fla_fn, name, B, T, layout, sdtype, serving=False, snapshots=False, peer=True,
             peer_sdtype=None, note=None, inplace=True, in_dtype=torch.bfloat16, env=None, warm=False):
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    nsets = 1 if warm else sets_needed(B, T, layout, sdtype, serving)  # warm: one set, the state stays in L2
    flags = torch.zeros(1, device="cuda", dtype=torch.int32)
    sets = [make_inputs(B, T, layout, sdtype, serving, state_out=not inplace, gen=gen, in_dtype=in_dtype)
            for _ in range(nsets)]
    snaps = None
    if snapshots:
        rc = (V, K) if layout == STATE_VK else (K, V)
        snaps = torch.empty(B, T, HV, *rc, device="cuda", dtype=sdtype)
    args = [decode_args(x, layout, inplace=inplace, serving=serving, snapshots=snaps, flags=flags) for x in sets]
    steps = max(nsets, 20)
    ours_steps = [(lambda a=args[i % nsets]: gdn_step(gdn, a)) for i in range(steps)]
    os.environ.update(env or {})  # read by the library when the graph is captured
    try:
        ours_ms = time_graph(ours_steps)
    finally:
        for var in env or {}:
            os.environ.pop(var, None)
    assert flags.item() == 0, f"{name}: error flags {flags.item()}"
    res = dict(name=name, ours_ms=ours_ms, peer_ms=None, ratio=None, timing="graph",
               state_gbps=state_traffic(B, T, sdtype, snapshots) / (ours_ms * 1e-3) / 1e9)
    if note:
        res["note"] = note
    if peer and fla_fn is not None:
        psets = sets
        if peer_sdtype is not None and peer_sdtype != sdtype:
            psets = [dict(x, state=x["state"].to(peer_sdtype)) for x in sets]
        peer_steps = [peer_step(fla_fn, psets[i % nsets], layout, serving) for i in range(steps)]
        try:
            peer_ms = time_graph(peer_steps)
            res["peer_ms"] = peer_ms
            res["ratio"] = ours_ms / peer_ms
            ps = peer_sdtype or sdtype
            peer_bytes = B * HV * K * V * (torch.tensor([], dtype=ps).element_size() + 4)  # fla writes f32
            res["peer_state_gbps"] = peer_bytes / (peer_ms * 1e-3) / 1e9
        except Exception as e:  # noqa: BLE001
            res["peer_error"] = repr(e)[:300]
    del sets, args, snaps
    torch.cuda.empty_cache()
    return res


def reference_step(x, layout, scale):
    """One decode step (T = 1) in f64 on the GPU: SPEC.md's recurrence, block head map."""
    q = x["q"][:, 0].double().repeat_interleave(HV // HK, dim=1)  # [B, Hv, K]
    k = x["k"][:, 0].double().repeat_interleave(HV // HK, dim=1)
    v = x["v"][:, 0].double()                                      # [B, Hv, V]
    alpha = torch.exp(x["g"][:, 0].double())[..., None, None]      # [B, Hv, 1, 1]
    beta = x["beta"][:, 0].double()[..., None]
    S = x["state"].double()
    if layout == STATE_KV:
        S = S.transpose(-1, -2)                                    # [B, Hv, V, K]
    S = alpha * S
    delta = beta * (v - torch.einsum("bhvk,bhk->bhv", S, k))
    S = S + delta[..., None] * k[..., None, :]
    o = scale * torch.einsum("bhvk,bhk->bhv", S, q)
    if layout == STATE_KV:
        S = S.transpose(-1, -2)
    return o, S


def correctness(gdn, fla_fn, B=16, layout=STATE_VK):
    """Ours and the peer against each other and an f64 reference on one decode step."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = make_inputs(B, 1, layout, torch.float32, state_out=True, gen=gen)
    gdn_step(gdn, decode_args(x, layout, inplace=False))
    torch.cuda.synchronize()
    o_ref, s_ref = reference_step(x, layout, K ** -0.5)
    out = dict(case=f"decode-B{B}-{'vk' if layout == STATE_VK else 'kv'}",
               ours_vs_f64_o=rel_l2(x["o"][:, 0].float(), o_ref), ours_vs_f64_state=rel_l2(x["state_out"], s_ref))
    if fla_fn is not None:
        o_p, s_p = peer_step(fla_fn, x, layout)()
        torch.cuda.synchronize()
        out.update(peer_vs_f64_o=rel_l2(o_p[:, 0].float(), o_ref), peer_vs_f64_state=rel_l2(s_p, s_ref),
                   ours_vs_peer_o=rel_l2(x["o"].float(), o_p.float()), ours_vs_peer_state=rel_l2(x["state_out"], s_p))
    return out


def plain_case(gdn, fla_fn):
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = make_inputs(1, 1, STATE_VK, torch.float32, gen=gen)
    a = decode_args(x, STATE_VK, inplace=True)
    ours_ms = time_plain(lambda: gdn_step(gdn, a))
    res = dict(name="decode-B1-vk-plain", ours_ms=ours_ms, peer_ms=None, ratio=None, timing="events",
               state_gbps=state_traffic(1, 1, torch.float32, False) / (ours_ms * 1e-3) / 1e9,
               note="one plain launch per step from Python (ctypes included), 2000 back to back, events around them")
    if fla_fn is not None:
        step = peer_step(fla_fn, x, STATE_VK)
        res["peer_ms"] = time_plain(step, calls=500)
        res["ratio"] = ours_ms / res["peer_ms"]
    return res


def decode_cases():
    """(name, B, T, layout, state dtype, kwargs) of every case, BENCH.md's order."""
    out = []
    for B in (1, 16, 64, 256, 1024):
        out.append((f"decode-B{B}-vk", B, 1, STATE_VK, torch.float32, {}))
    for B in (1, 16, 64, 256, 1024):
        out.append((f"decode-B{B}-kv", B, 1, STATE_KV, torch.float32, {}))
    for B in (1, 16, 64, 256, 1024):
        out.append((f"decode-B{B}-vk-bf16state", B, 1, STATE_VK, torch.bfloat16,
                    dict(peer_sdtype=torch.bfloat16,
                         note="peer: fla reads the bf16 state and writes an f32 final state (it has no bf16 one)")))
    out.append(("verify-B64-T4", 64, 4, STATE_VK, torch.float32,
                dict(snapshots=True, peer=False, note="per-token states [N, T, Hv, V, K]: fla has no such output")))
    out.append(("verify-B64-T4-nosnap", 64, 4, STATE_VK, torch.float32,
                dict(note="reference: T = 4 without per-token states, which fla can run")))
    out.append(("decode-B256-vk-serving", 256, 1, STATE_VK, torch.float32,
                dict(serving=True, note="raw gate + q/k L2 norm + beta logit + state pool, in place; "
                                        "peer: the same fused gate and norms, dense state")))
    for B in (1, 16, 64, 256, 1024):
        out.append((f"decode-B{B}-vk-outofplace", B, 1, STATE_VK, torch.float32,
                    dict(inplace=False, note="ours writes the final state to its own buffer, as fla does")))
    out.append(("decode-B256-vk-f32inputs", 256, 1, STATE_VK, torch.float32,
                dict(in_dtype=torch.float32, note="f32 q/k/v/o for both")))
    for B in (1, 16):
        out.append((f"decode-B{B}-vk-warm", B, 1, STATE_VK, torch.float32,
                    dict(warm=True, note="one input set, not rotated: the state stays in the L2 between steps "
                                         "(BENCH.md's 2.57 us peer reference at B = 1 is below what a cold "
                                         "state allows here; is it this?)")))
    # ours with one library choice switched off through its environment variable, at B = 1, 16, 256
    switched = [("genericform", {"GDN_DECODE_FORM": "generic"},
                 "ours: the generic one-token kernel (every dtype and option read at run time), "
                 "against the default plain-input form of decode-B*-vk"),
                ("noearly", {"GDN_DECODE_EARLY_LAUNCH": "0"},
                 "ours without the early (programmatic dependent) launch: each step's kernel "
                 "is scheduled only once the previous one has finished, as the peer's is")]
    for suffix, env, note in switched:
        for B in (1, 16, 256):
            out.append((f"decode-B{B}-vk-{suffix}", B, 1, STATE_VK, torch.float32, dict(env=env, note=note)))
    for B, hints in ((256, "plain"), (1024, "stream")):  # the other side of decode_streams_state's switch
        out.append((f"decode-B{B}-vk-{hints}hints", B, 1, STATE_VK, torch.float32,
                    dict(env={"GDN_DECODE_STATE_HINTS": hints},
                         note=f"ours with {hints} cache hints on the state (the default switches at 256 MiB of state)")))
    # the final state to its own buffer with the other cache hints and first-input order, where
    # the out-of-place rows sit nearest their targets (B = 1 and 16)
    for B in (1, 16):
        out.append((f"decode-B{B}-vk-outofplace-plainhints", B, 1, STATE_VK, torch.float32,
                    dict(inplace=False, env={"GDN_DECODE_STATE_HINTS": "plain"},
                         note="decode-B*-vk-outofplace with plain cache hints on the state")))
        out.append((f"decode-B{B}-vk-plainhints", B, 1, STATE_VK, torch.float32,
                    dict(env={"GDN_DECODE_STATE_HINTS": "plain"},
                         note="decode-B*-vk (in place) with plain cache hints on the state")))
    out.append(("decode-B16-vk-outofplace-firstlate", 16, 1, STATE_VK, torch.float32,
                dict(inplace=False, env={"GDN_DECODE_FIRST_INPUTS": "late"},
                     note="decode-B16-vk-outofplace with the first token's input addresses formed after the wait")))
    # the other side of decode_first_inputs_early's switch (dense grids of 4096 CTAs and more: B >= 8
    # here), and both sides near it
    for B, side in ((1, "early"), (4, "early"), (4, "late"), (8, "early"), (8, "late"), (16, "late"), (64, "late"),
                    (256, "late"), (1024, "late")):
        out.append((f"decode-B{B}-vk-first{side}", B, 1, STATE_VK, torch.float32,
                    dict(env={"GDN_DECODE_FIRST_INPUTS": side},
                         note=f"ours with the first token's input addresses formed {'before' if side == 'early' else 'after'} "
                              "the early launch's wait (the default: before from 4096 CTAs)")))
    out.append(("decode-B256-vk-serving-genericform", 256, 1, STATE_VK, torch.float32,
                dict(serving=True, env=switched[0][1],
                     note="ours: decode-B256-vk-serving on the generic one-token kernel")))
    out.append(("decode-B256-vk-again", 256, 1, STATE_VK, torch.float32,
                dict(note="decode-B256-vk once more, last: drift between the start and end of the run")))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-cuda/lib/libgdn.so")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--commit", default=os.environ.get("GDN_COMMIT", "unknown"))
    ap.add_argument("--cases", default="", help="regular expression: only the cases whose name matches")
    ap.add_argument("--tag", default="", help="suffix of the results file name (variants of one run)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gdn = gc.Gdn(args.lib)
    fla_fn, peer_name = load_peer()
    torch.backends.cuda.matmul.allow_tf32 = False
    results = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(),
                   driver=subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True).stdout.strip(),
                   commit=args.commit, peer=peer_name, library=gdn.version(),
                   copy_ceiling_gbps=COPY_CEILING_GBPS, cases=[])
    results["correctness"] = [correctness(gdn, fla_fn, 16, STATE_VK), correctness(gdn, fla_fn, 16, STATE_KV)]
    print(json.dumps(results["correctness"], indent=1), flush=True)
    for name, B, T, layout, sdtype, kw in decode_cases():
        if args.cases and not re.search(args.cases, name):
            continue
        try:
            r = run_case(gdn, fla_fn, name, B, T, layout, sdtype, **kw)
        except Exception as e:  # noqa: BLE001
            r = dict(name=name, ours_ms=None, peer_ms=None, ratio=None, timing="graph", error=repr(e)[:300])
        print(json.dumps(r), flush=True)
        results["cases"].append(r)
    if not args.cases or re.search(args.cases, "decode-B1-vk-plain"):
        results["cases"].append(plain_case(gdn, fla_fn))
        print(json.dumps(results["cases"][-1]), flush=True)
    path = os.path.join(args.out, f"{results['date']}-h200-decode{args.tag}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nresults: {path}")
    print(f"{'case':28s}{'ours us':>10s}{'fla us':>10s}{'ours/fla':>10s}{'ours GB/s':>11s}{'% ceiling':>10s}{'fla GB/s':>10s}")
    for r in results["cases"]:
        o, p = r.get("ours_ms"), r.get("peer_ms")
        fmt = lambda v, s=1e3, w=10, d=1: f"{v * s:{w}.{d}f}" if v is not None else f"{'-':>{w}s}"
        print(f"{r['name']:28s}{fmt(o)}{fmt(p)}{fmt(r.get('ratio'), 1, 10, 3)}"
              f"{fmt(r.get('state_gbps'), 1, 11, 0)}{fmt((r.get('state_gbps') or 0) / COPY_CEILING_GBPS, 100, 10, 1)}"
              f"{fmt(r.get('peer_state_gbps'), 1, 10, 0)}")


if __name__ == "__main__":
    main()
