#!/usr/bin/env python3
"""The fused warp-specialised kernel's timeline: where each role's time goes a chunk, and who
waits for whom, from a lab build's clock64 marks (cmake -DGDN_WS_TRACE=ON: chunked_fused_ws.cuh
records, for the first 4 CTAs and 64 chunks, lane 0 of every warp at 8 points a chunk).

    python3 bench/ws_trace.py --lib build-trace/lib/libgdn.so [--case prefill-4x8192] [--keys raw] [--json F]

Runs the case on the fused form a few times, reads the last launch's marks
(gdn_debug_ws_trace) and prints, as medians over CTAs and chunks 4..62 in cycles of the SM
clock (and us at --ghz): the chain's step, each role's stretches between its marks, and each
warp's wait at the hand-offs and at its role's barriers. Needs a GPU and torch.

Reading it: a mark right after a bar.sync records the warp's arrival there, not its release
(the H200 runs, thirtieth session: the marks after the inverse role's barriers differ by warp
by as much as the work before them, and the warps leave a barrier together). BAR.SYNC defers
its block to a later instruction, and the clock read is issued first. So a barrier's wait
shows in the stretch after the next mark ("start" of the chain holds the wait at the step's
last barrier), and "(all)" rows are the arrival's spread, not the wait.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_prefill as bp  # noqa: E402
import gdn_ctypes as gdn  # noqa: E402

CTAS, CHUNKS, WARPS, EVENTS = 4, 64, 16, 8  # chunked_fused_ws.cuh's kTrace* and kWsThreads / 32
# the marks by role (chunked_fused_ws.cuh: GDN_WS_MARK(c, e)), each a point after the work named
MARKS = {
    "chain": ["start", "T, Xw ready", "P ready", "copies issued", "-W, U (warp)", "-W, U (all)",
              "outputs, update (warp)", "outputs, update (all)"],
    "inverse": ["start", "Kc landed", "gates (key norms)", "m epilogue", "diagonal block (warp)",
                "diagonal blocks (all)", "merges", "T, Xw"],
    "outputs": ["start", "q, Kc", "gates", "q landed", "Qc Kc^T", "P formed, range", "P stored (all)",
                "handed over"],
}
ROLE_WARPS = {"chain": range(0, 8), "inverse": range(8, 12), "outputs": range(12, 16)}


def summarize(t, ghz):
    """t: [CTAS, CHUNKS, WARPS, EVENTS] clock64 values; medians over CTAs and chunks 4..62."""
    t = t.astype(np.int64)
    cs = range(4, CHUNKS - 1)
    us = lambda cycles: cycles / (ghz * 1e3)
    out = {"step": statistics.median(int(t[b, c + 1, 0, 0] - t[b, c, 0, 0]) for b in range(CTAS) for c in cs)}
    print("chain step (warp 0, start to start): %d cycles, %.2f us" % (out["step"], us(out["step"])))
    for role, names in MARKS.items():
        ws = ROLE_WARPS[role]
        print("%s (warps %d..%d): median cycles from the previous mark, per warp" % (role, ws[0], ws[-1]))
        rows = {}
        for e in range(EVENTS):
            prev = lambda b, c, w: t[b, c, w, e - 1] if e else t[b, c - 1, w, EVENTS - 1]
            per_warp = [statistics.median(int(t[b, c, w, e] - prev(b, c, w)) for b in range(CTAS) for c in cs)
                        for w in ws]
            rows[names[e]] = per_warp
            print("  %-24s %s   (%.2f us, warp median)" % (names[e], " ".join("%6d" % x for x in per_warp),
                                                        us(statistics.median(per_warp))))
        out[role] = rows
    # the hand-offs: how long after its producer's mark each consumer got past its wait
    hand = {
        "chain waits for T, Xw: its start -> T, Xw ready": (0, 0, 0, 1),
        "chain waits for P: T, Xw ready -> P ready": (0, 1, 0, 2),
        "inverse's hand-over -> chain past its wait": (8, 7, 0, 1),
        "outputs' hand-over -> chain past its wait": (12, 7, 0, 2),
        "outputs' norms -> inverse past its wait": (12, 2, 8, 2),
    }
    print("hand-offs (median cycles, same chunk):")
    out["hand_offs"] = {}
    for name, (wa, ea, wb, eb) in hand.items():
        v = statistics.median(int(t[b, c, wb, eb] - t[b, c, wa, ea]) for b in range(CTAS) for c in cs)
        out["hand_offs"][name] = v
        print("  %-48s %7d (%.2f us)" % (name, v, us(v)))
    # which preparing role the chain's step waited for: the one whose hand-over came last
    # before the chain got past both waits (warp 0), and by how much after the step's start
    late = {"inverse": 0, "outputs": 0, "neither": 0}
    for b in range(CTAS):
        for c in cs:
            start, inv, outp = int(t[b, c, 0, 0]), int(t[b, c, 8, 7]), int(t[b, c, 12, 7])
            if max(inv, outp) <= start:
                late["neither"] += 1
            else:
                late["inverse" if inv >= outp else "outputs"] += 1
    out["chain_waited_for"] = late
    print("the chain's step waited for (chunks): %s" % ", ".join("%s %d" % kv for kv in late.items()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="a libgdn.so built with -DGDN_WS_TRACE=ON")
    ap.add_argument("--case", default="prefill-4x8192")
    ap.add_argument("--keys", default="spec", choices=["spec", "large", "raw", "normed"],
                    help="bench_prefill.py's inputs: raw and normed have q and k L2-normalised in the kernel (qk_l2norm)")
    ap.add_argument("--ghz", type=float, default=1.98, help="the SM clock, for the us columns")
    ap.add_argument("--json", default="")
    ap.add_argument("--raw", default="", help="also the marks themselves, [4, 64, 16, 8] clock64, as .npy")
    args = ap.parse_args()
    os.environ["GDN_CHUNKED_FORM"] = "fused"
    lib = gdn.Gdn(args.lib)
    read = lib.lib.gdn_debug_ws_trace
    read.argtypes, read.restype = [ctypes.c_void_p, ctypes.c_size_t], ctypes.c_longlong
    name, lengths, Hk, Hv, packed = next(c for c in bp.CASES if c[0] == args.case)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = bp.make_inputs(lengths, Hk, Hv, packed, gen, args.keys)
    a = bp.ours_args(lib, x, packed)
    for _ in range(3):
        lib.forward(a)
    torch.cuda.synchronize()
    t = np.zeros((CTAS, CHUNKS, WARPS, EVENTS), dtype=np.uint64)
    n = read(t.ctypes.data, t.nbytes)
    if n != t.nbytes:
        sys.exit("gdn_debug_ws_trace copied %d of %d bytes (not a trace build?)" % (n, t.nbytes))
    if not t.any():
        sys.exit("no marks: the fused warp-specialised kernel did not run")
    if args.raw:
        np.save(args.raw, t)
    out = summarize(t, args.ghz)
    out["case"] = args.case
    out["keys"] = args.keys
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
