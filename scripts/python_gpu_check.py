#!/usr/bin/env python3
"""gdn.fla against flash-linear-attention and the transformers Qwen3-Next torch references, on
one CUDA device, with the same random inputs (SPEC.md distributions).

For chunk_gated_delta_rule and fused_recurrent_gated_delta_rule; dense and packed batches; with
and without an initial state; state_v_first off and on; bf16 and f32 inputs. Every output is
measured against the float64 oracle (gdn's reference backend, run on the host on the same
already-rounded inputs), and the oracle itself against the transformers reference (SPEC.md: an
oracle is checked against an independent one). Then: a non-default stream and a CUDA graph.

Prints a table; exits 1 when gdn misses a SPEC.md tolerance, when the transformers reference
disagrees with the oracle, or when the stream or graph checks fail. fla's figures are shown for
comparison, not judged, in bf16 only (each further dtype costs fla minutes of Triton autotuning).
Rows print as they complete.

    PYTHONPATH=/tmp/site python3 scripts/python_gpu_check.py   # fla-core on /tmp/site
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

import gdn
from gdn import fla as ours

# SPEC.md "Numerical targets": (output, final state) relative L2 error against the f64 oracle.
RECURRENT = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (4e-3, 1e-5)}
CHUNKED = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (3e-3, 2.5e-3)}
# The function name is no promise of the path ("auto" may pick either): the looser bound holds.
TOLERANCE = {
    "chunk": {dt: tuple(max(a, b) for a, b in zip(RECURRENT[dt], CHUNKED[dt])) for dt in CHUNKED},
    "fused_recurrent": RECURRENT,
}
# The transformers reference computes in f32 and rounds o to the input dtype.
HF_TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (4e-3, 1e-5)}


def unwrapped(func):
    """The plain body under transformers' dispatching decorators (SPEC.md: they call fla when it
    is importable)."""
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return func


def rel_err(x, ref) -> float:
    x, ref = x.double(), ref.double().to(x.device)
    if not torch.isfinite(x).all():
        return float("inf")
    return ((x - ref).norm() / ref.norm()).item()


DEVICE = "cuda"


def make_inputs(lengths, packed, hk, hv, kd, vd, dtype, with_state, state_v_first, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    randn = lambda *s: torch.randn(*s, generator=gen, device=DEVICE)  # noqa: E731
    b, t = (1, sum(lengths)) if packed else (len(lengths), lengths[0])
    q = randn(b, t, hk, kd).to(dtype)
    k = F.normalize(randn(b, t, hk, kd), p=2, dim=-1).to(dtype)
    v = randn(b, t, hv, vd).to(dtype)
    g = F.logsigmoid(randn(b, t, hv))
    beta = torch.sigmoid(randn(b, t, hv))
    shape = (len(lengths), hv, vd, kd) if state_v_first else (len(lengths), hv, kd, vd)
    h0 = 0.5 * randn(*shape) if with_state else None
    cu = None
    if packed:
        cu = torch.tensor([0] + lengths, device=DEVICE).cumsum(0)
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, cu_seqlens=cu)


def sequences(x, cu, n):
    """Per-sequence [1, T_n, ...] slices of a packed or dense batch."""
    if cu is None:
        return [x[i:i + 1] for i in range(n)]
    cu = cu.tolist()
    return [x[:, cu[i]:cu[i + 1]] for i in range(n)]


def oracle(inp, state_v_first, use_l2):
    """float64 o and final state (kv unless state_v_first) from gdn's reference backend."""
    host = {key: (None if x is None else x.cpu()) for key, x in inp.items()}
    packed = host["cu_seqlens"] is not None
    flat = lambda x: x[0] if packed else x  # noqa: E731
    f64 = lambda x: x.double()  # noqa: E731
    q, k, v = (f64(flat(host[key])) for key in ("q", "k", "v"))
    g, beta = f64(flat(host["g"])), f64(flat(host["beta"]))
    h0 = None if host["initial_state"] is None else f64(host["initial_state"])
    n = len(host["cu_seqlens"]) - 1 if packed else q.shape[0]
    hv, kd, vd = v.shape[-2], q.shape[-1], v.shape[-1]
    ht = torch.empty((n, hv, vd, kd) if state_v_first else (n, hv, kd, vd), dtype=torch.float64)
    o, ht, _ = gdn.forward(q, k, v, g, beta, initial_state=h0, cu_seqlens=host["cu_seqlens"],
                           final_state=ht, state_layout="vk" if state_v_first else "kv",
                           qk_l2norm=use_l2, backend="reference")
    return (o[None] if packed else o), ht


def transformers_reference(func, inp, state_v_first, use_l2):
    """The torch reference, per sequence (it knows neither packing nor the vk layout)."""
    n = inp["initial_state"].shape[0] if inp["initial_state"] is not None else (
        len(inp["cu_seqlens"]) - 1 if inp["cu_seqlens"] is not None else inp["q"].shape[0])
    outs, states = [], []
    cu = inp["cu_seqlens"]
    parts = {key: sequences(inp[key], cu, n) for key in ("q", "k", "v", "g", "beta")}
    for i in range(n):
        h0 = inp["initial_state"]
        if h0 is not None:
            h0 = h0[i:i + 1].transpose(-1, -2) if state_v_first else h0[i:i + 1]
        # older transformers need one key head per value head: repeat in block order, as the
        # Qwen3-Next layer itself does before calling
        r = parts["v"][i].shape[2] // parts["q"][i].shape[2]
        qi, ki = (x.repeat_interleave(r, dim=2) for x in (parts["q"][i], parts["k"][i]))
        o, ht = func(qi, ki, parts["v"][i], g=parts["g"][i],
                     beta=parts["beta"][i], initial_state=h0, output_final_state=True,
                     use_qk_l2norm_in_kernel=use_l2)
        outs.append(o)
        states.append(ht.transpose(-1, -2) if state_v_first else ht)
    return torch.cat(outs, dim=1 if cu is not None else 0), torch.cat(states)


def run(func, inp, state_v_first, use_l2):
    kwargs = dict(initial_state=inp["initial_state"], output_final_state=True,
                  use_qk_l2norm_in_kernel=use_l2, cu_seqlens=inp["cu_seqlens"])
    if state_v_first:
        kwargs["state_v_first"] = True
    with torch.inference_mode():
        o, ht = func(inp["q"], inp["k"], inp["v"], inp["g"], beta=inp["beta"], **kwargs)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return o, ht


COLUMNS = ["gdn", "fla", "hf", "gdn~fla"]


def print_row(case, errs, tol, status):
    cells = "".join(f"{('%.1e / %.1e' % errs[c]) if c in errs else '-':>22}" for c in COLUMNS)
    print(f"{case:<40}{cells}{tol:>18}  {status}", flush=True)


def check_cases(args, peer, modeling):
    failed = False
    shapes = dict(hk=args.hk, hv=args.hv, kd=args.dim, vd=args.dim)
    seed = 0
    for name in ("chunk", "fused_recurrent"):
        func_name = f"{name}_gated_delta_rule"
        hf = unwrapped(getattr(modeling, f"torch_{'chunk' if name == 'chunk' else 'recurrent'}"
                                          "_gated_delta_rule"))
        for dtype in (torch.bfloat16, torch.float32):
            for packed in (False, True):
                lengths = [37, 64, 1, 130] if packed else [args.t] * args.b
                for with_state in (False, True):
                    for svf in (False, True):
                        seed += 1
                        inp = make_inputs(lengths, packed, dtype=dtype, with_state=with_state,
                                          state_v_first=svf, seed=seed, **shapes)
                        ref_o, ref_s = oracle(inp, svf, True)
                        case = (f"{name} {str(dtype)[6:]} {'packed' if packed else 'dense'} "
                                f"h0={'y' if with_state else 'n'} "
                                f"{'vk' if svf else 'kv'}")
                        o, s = run(getattr(ours, func_name), inp, svf, True)
                        errs = {"gdn": (rel_err(o, ref_o), rel_err(s, ref_s))}
                        settings = chunked_settings(args) if name == "chunk" else []
                        if peer is not None and dtype == torch.bfloat16:
                            po, ps = run(getattr(peer, func_name), inp, svf, True)
                            errs["fla"] = (rel_err(po, ref_o), rel_err(ps, ref_s))
                            errs["gdn~fla"] = (rel_err(o, po), rel_err(s, ps))
                        with torch.inference_mode():
                            ho, hs = transformers_reference(hf, inp, svf, True)
                        errs["hf"] = (rel_err(ho, ref_o), rel_err(hs, ref_s))
                        tol_o, tol_s = TOLERANCE[name][dtype]
                        hf_o, hf_s = HF_TOLERANCE[dtype]
                        ok = (errs["gdn"][0] <= tol_o and errs["gdn"][1] <= tol_s
                              and o.shape == ref_o.shape and s.shape == ref_s.shape
                              and o.dtype == inp["q"].dtype and s.dtype == torch.float32)
                        hf_ok = errs["hf"][0] <= hf_o and errs["hf"][1] <= hf_s
                        status = "ok" if ok and hf_ok else ("FAIL" if not ok else "FAIL(hf)")
                        failed |= status != "ok"
                        print_row(case, errs, f"{tol_o:.1e}/{tol_s:.1e}", status)
                        for setting in settings:  # the same inputs under each setting, gdn only
                            with environment(setting):
                                fo, fs = run(getattr(ours, func_name), inp, svf, True)
                            fe = (rel_err(fo, ref_o), rel_err(fs, ref_s))
                            f_ok = fe[0] <= tol_o and fe[1] <= tol_s
                            failed |= not f_ok
                            print(f"  {'+'.join(setting)}: gdn o {fe[0]:.2e} state {fe[1]:.2e} "
                                  f"{'ok' if f_ok else 'FAIL'}", flush=True)
    return failed


def chunked_settings(args):
    """--chunked-env VAR=x+VAR2=y,VAR=z as [["VAR=x", "VAR2=y"], ["VAR=z"]] (no spaces or
    semicolons: it passes through device_pass.sh's PYTHON_CHECKS)."""
    return [item.split("+") for item in args.chunked_env.split(",") if item.strip()]


class environment:
    """Environment variables set for a block (the library reads GDN_CHUNKED_* at each call)."""

    def __init__(self, assignments):
        self.new = dict(a.split("=", 1) for a in assignments)
        self.old = {}

    def __enter__(self):
        for key, value in self.new.items():
            self.old[key] = os.environ.get(key)
            os.environ[key] = value

    def __exit__(self, *exc):
        for key, value in self.old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def check_stream_and_graph(args):
    """gdn.fla follows torch's current stream, and can be captured in a CUDA graph."""
    results = []
    inp = make_inputs([1] * 4, False, args.hk, args.hv, args.dim, args.dim, torch.bfloat16,
                      True, False, seed=99)
    o_ref, s_ref = run(ours.fused_recurrent_gated_delta_rule, inp, False, True)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o, s = run(ours.fused_recurrent_gated_delta_rule, inp, False, True)
    side.synchronize()
    results.append(("side stream: same result", torch.equal(o, o_ref) and torch.equal(s, s_ref)))

    try:
        graph = torch.cuda.CUDAGraph()
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            run(ours.fused_recurrent_gated_delta_rule, inp, False, True)
        torch.cuda.current_stream().wait_stream(warm)
        with torch.inference_mode(), torch.cuda.graph(graph):
            o_g, s_g = ours.fused_recurrent_gated_delta_rule(
                inp["q"], inp["k"], inp["v"], inp["g"], beta=inp["beta"],
                initial_state=inp["initial_state"], output_final_state=True,
                use_qk_l2norm_in_kernel=True)
        graph.replay()
        torch.cuda.synchronize()
        ok = torch.equal(o_g, o_ref) and torch.equal(s_g, s_ref)
        results.append(("CUDA graph: capture and replay", ok))
    except Exception as exc:  # the report says what failed
        results.append((f"CUDA graph: {type(exc).__name__}: {exc}", False))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=3)
    parser.add_argument("--t", type=int, default=100)
    parser.add_argument("--hk", type=int, default=4)
    parser.add_argument("--hv", type=int, default=8)
    parser.add_argument("--dim", type=int, default=128, help="K = V")
    parser.add_argument("--only-stream-graph", action="store_true",
                        help="skip the comparison table (minutes of fla autotuning): the stream "
                             "and graph checks only")
    parser.add_argument("--chunked-env", default="",
                        help="settings the chunk rows run under once more, gdn only, each judged "
                             "against the tolerance: GDN_CHUNKED_FORM=fused,GDN_CHUNKED_FORM=fused"
                             "+GDN_CHUNKED_WS=0,GDN_CHUNKED_FORM=split2 (which kernel gives which "
                             "error)")
    parser.add_argument("--device", default="cuda",
                        help="cpu: a smoke run of the script itself (gdn's CPU backend; no fla, "
                             "no stream or graph checks)")
    args = parser.parse_args()

    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not (torch.cuda.is_available() and gdn.backend_available("cuda")):
        print("no CUDA device, or gdn was built without its CUDA backend (no nvcc at build time)")
        return 1
    import transformers
    from transformers.models.qwen3_next import modeling_qwen3_next as modeling
    try:
        if DEVICE != "cuda":
            raise ImportError("its kernels need a GPU")
        import fla
        from fla.ops import gated_delta_rule as peer
        peer_version = getattr(fla, "__version__", "?")
    except ImportError as exc:
        print(f"flash-linear-attention not used ({exc}): its columns stay empty")
        peer, peer_version = None, "-"
    device = gdn.cuda_device_info(0) if DEVICE == "cuda" else f"host ({gdn.cpu_simd_target()})"
    print(f"gdn {gdn.__version__} | {device} | torch {torch.__version__} | "
          f"transformers {transformers.__version__} | fla {peer_version}")
    print(f"Hk={args.hk} Hv={args.hv} K=V={args.dim}; dense B={args.b} T={args.t}; packed "
          "lengths 37,64,1,130; qk l2norm on; errors: relative L2 vs the f64 oracle (o / state)\n")

    header = f"{'case':<40}" + "".join(f"{c + ' o/state':>22}" for c in COLUMNS)
    print(header + f"{'gdn tol':>18}  status", flush=True)
    failed = False if args.only_stream_graph else check_cases(args, peer, modeling)

    print()
    for what, ok in (check_stream_and_graph(args) if DEVICE == "cuda" else []):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        failed |= not ok
    print("\nFAILED" if failed else "\nall checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
