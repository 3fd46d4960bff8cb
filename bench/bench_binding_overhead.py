#!/usr/bin/env python3
"""Host cost of one decode call from Python: gdn.fla.fused_recurrent_gated_delta_rule against
flash-linear-attention's, B = 1, Hk = 16, Hv = 32, K = V = 128, bf16 q/k/v, f32 gates and state,
initial and final state on (BENCH.md's decode-B1 shape).

The GPU is first given a long sleep kernel, so that the calls only queue up behind it: the wall
time of N back-to-back calls divided by N is then the host time per call, from Python to the
kernel launch (argument handling, output allocation, DLPack export, validation, launch), and no
GPU execution time. One synchronisation at the end of each batch.

    PYTHONPATH=/tmp/site python3 bench/bench_binding_overhead.py   # fla-core on /tmp/site
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gdn
import gdn.fla


def decode_inputs(layout: str):
    b, hk, hv, d = 1, 16, 32, 128
    q = torch.randn(b, 1, hk, d, device="cuda", dtype=torch.bfloat16)
    k = F.normalize(torch.randn(b, 1, hk, d, device="cuda"), dim=-1).to(torch.bfloat16)
    v = torch.randn(b, 1, hv, d, device="cuda", dtype=torch.bfloat16)
    g = F.logsigmoid(torch.randn(b, 1, hv, device="cuda"))
    beta = torch.sigmoid(torch.randn(b, 1, hv, device="cuda"))
    h0 = torch.randn(b, hv, d, d, device="cuda")
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, state_v_first=layout == "vk")


def fla_call(func, x):
    return lambda: func(x["q"], x["k"], x["v"], x["g"], beta=x["beta"],
                        initial_state=x["initial_state"], output_final_state=True,
                        state_v_first=x["state_v_first"])


def forward_call(x):
    """gdn.forward with its outputs preallocated: the binding without the fla shim."""
    o = torch.empty_like(x["v"])
    ht = torch.empty_like(x["initial_state"])
    layout = "vk" if x["state_v_first"] else "kv"
    return lambda: gdn.forward(x["q"], x["k"], x["v"], x["g"], x["beta"],
                               initial_state=x["initial_state"], out=o, final_state=ht,
                               state_layout=layout)


def host_us_per_call(call, calls: int, repeats: int) -> float:
    for _ in range(20):  # warm-up (fla compiles its Triton kernel on the first call)
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time: the calls below only queue
        start = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    if not (torch.cuda.is_available() and gdn.backend_available("cuda")):
        raise SystemExit("no CUDA device, or gdn was built without its CUDA backend")
    try:
        import fla  # noqa: F401
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as peer
    except ImportError as exc:
        print(f"flash-linear-attention not importable ({exc}): gdn only")
        peer = None

    print(f"gdn {gdn.__version__} | {gdn.cuda_device_info(0)} | torch {torch.__version__}")
    print(f"host time per call (us), median of {args.repeats} batches of {args.calls} calls "
          "queued behind a sleeping GPU\n")
    print(f"{'layout':<8}{'gdn.fla':>10}{'gdn.forward':>13}{'fla':>10}{'gdn.fla/fla':>13}")
    with torch.inference_mode():
        for layout in ("vk", "kv"):
            x = decode_inputs(layout)
            ours = host_us_per_call(fla_call(gdn.fla.fused_recurrent_gated_delta_rule, x),
                                    args.calls, args.repeats)
            bare = host_us_per_call(forward_call(x), args.calls, args.repeats)
            theirs = (host_us_per_call(fla_call(peer, x), args.calls, args.repeats)
                      if peer is not None else None)
            ratio = f"{ours / theirs:.2f}" if theirs else "-"
            theirs_text = f"{theirs:.1f}" if theirs else "-"
            print(f"{layout:<8}{ours:>10.1f}{bare:>13.1f}{theirs_text:>10}{ratio:>13}")


if __name__ == "__main__":
    main()
