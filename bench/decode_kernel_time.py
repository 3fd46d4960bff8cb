"""Kernel durations of one decode step, ours and fla's, for a profiler (not a benchmark).

Runs a few plain steps of BENCH.md's vk decode case at the given batch sizes, ours then the
peer's, each on its own input set, so that a profiler (Nsight Compute: gpu__time_duration)
reports the kernels' own time without the launch gaps a graph adds. Example:
  ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
      --csv python3 bench/decode_kernel_time.py --lib .devbuild/lib/libgdn.so --batch 1 16
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build-cuda/lib/libgdn.so")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    gdn = bd.gc.Gdn(args.lib)
    fla_fn, _ = bd.load_peer()
    for B in args.batch:
        sets = [bd.make_inputs(B, 1, bd.STATE_VK, torch.float32) for _ in range(args.steps)]
        for x in sets:
            bd.gdn_step(gdn, bd.decode_args(x, bd.STATE_VK))
        if fla_fn is not None:
            for x in sets:
                bd.peer_step(fla_fn, x, bd.STATE_VK)()
        torch.cuda.synchronize()
        print(f"B={B}: {args.steps} steps of ours, then of the peer", flush=True)


if __name__ == "__main__":
    main()
