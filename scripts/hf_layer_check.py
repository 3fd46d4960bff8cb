#!/usr/bin/env python3
"""A transformers Qwen3NextGatedDeltaNet layer gives the same outputs with gdn.fla's kernels as
with the plain torch reference bodies, for a prefill and a decode step through the layer's cache.

The layer calls the module-level names torch_chunk_gated_delta_rule (prefill) and
torch_recurrent_gated_delta_rule (decode) of transformers.models.qwen3_next.modeling_qwen3_next
at call time (SPEC.md), so patching those names swaps the kernels:
  reference: the decorated functions unwrapped through __wrapped__ (the plain torch bodies; the
             decorator would dispatch to fla when it is importable)
  gdn:       gdn.fla.chunk_gated_delta_rule / fused_recurrent_gated_delta_rule
  fla:       the decorated functions as they are (fla's kernels when importable), for scale
A small random config (K = V = 128), float32 and bfloat16. Exits 1 when gdn misses the
tolerance (relative L2): 1e-4 in float32; in bfloat16 4e-3 for outputs and 2.5e-3 for states
(SPEC.md's bf16 targets), or twice fla's own error where that is larger.

    PYTHONPATH=/tmp/site python3 scripts/hf_layer_check.py      # fla-core on /tmp/site
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import sys

import torch
from transformers.cache_utils import DynamicCache
from transformers.models.qwen3_next import modeling_qwen3_next as modeling
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

import gdn
import gdn.fla

NAMES = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")


def recurrent_state(cache, layer_idx=0):
    """The layer's recurrent state in the cache, across transformers 5.x versions."""
    if hasattr(cache, "get_recurrent_state"):
        return cache.get_recurrent_state(layer_idx)
    return cache.layers[layer_idx].recurrent_states[0]


def unwrapped(func):
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return func


DECORATED = {name: getattr(modeling, name) for name in NAMES}
IMPLEMENTATIONS = {
    "reference": {name: unwrapped(func) for name, func in DECORATED.items()},
    "gdn": {"torch_chunk_gated_delta_rule": gdn.fla.chunk_gated_delta_rule,
            "torch_recurrent_gated_delta_rule": gdn.fla.fused_recurrent_gated_delta_rule},
    "fla": DECORATED,
}


@contextlib.contextmanager
def patched(functions):
    try:
        for name, func in functions.items():
            setattr(modeling, name, func)
        yield
    finally:
        for name, func in DECORATED.items():
            setattr(modeling, name, func)


def rel_err(x, ref) -> float:
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return ((x - ref).norm() / ref.norm()).item()


def run_layer(layer, config, prompt, token, functions):
    """Prefill without a cache, prefill into a cache, one decode step from it."""
    with patched(functions), torch.inference_mode():
        plain = layer(prompt)
        cache = DynamicCache(config=config)
        # the keyword is cache_params in transformers <= 5.17 and cache later
        key = "cache_params" if "cache_params" in inspect.signature(layer.forward).parameters else "cache"
        prefill = layer(prompt, **{key: cache})
        state_after_prefill = recurrent_state(cache).clone()
        decode = layer(token, **{key: cache})
        state_after_decode = recurrent_state(cache).clone()
    return {"prefill (no cache)": plain, "prefill (cache)": prefill,
            "state after prefill": state_after_prefill, "decode step": decode,
            "state after decode": state_after_decode}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=150, help="prompt length")
    args = parser.parse_args()
    if args.device == "cuda" and not (torch.cuda.is_available() and gdn.backend_available("cuda")):
        print("no CUDA device, or gdn was built without its CUDA backend (no nvcc at build time)")
        return 1

    config = Qwen3NextConfig(
        hidden_size=512, num_hidden_layers=1, layer_types=["linear_attention"],
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6)
    implementations = dict(IMPLEMENTATIONS)
    try:  # without fla the decorated functions are the reference bodies again
        import fla  # noqa: F401
    except ImportError:
        implementations.pop("fla")
    if args.device != "cuda":
        implementations.pop("fla", None)
    print(f"gdn {gdn.__version__}; layer Qwen3NextGatedDeltaNet Hk=2 Hv=4 K=V=128 hidden=512; "
          f"batch {args.batch}, prompt {args.tokens} tokens then 1 decode token; "
          f"implementations: {', '.join(implementations)}")
    print("relative L2 error against the reference bodies\n")

    failed = False
    print(f"{'dtype':<10}{'output':<22}{'gdn':>10}{'fla':>10}{'tolerance':>11}  status")
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        layer = modeling.Qwen3NextGatedDeltaNet(config, layer_idx=0).to(args.device, dtype).eval()
        prompt = torch.randn(args.batch, args.tokens, config.hidden_size, device=args.device,
                             dtype=dtype)
        token = torch.randn(args.batch, 1, config.hidden_size, device=args.device, dtype=dtype)
        results = {name: run_layer(layer, config, prompt, token, functions)
                   for name, functions in implementations.items()}
        for what, ref in results["reference"].items():
            ours = rel_err(results["gdn"][what], ref)
            peer = rel_err(results["fla"][what], ref) if "fla" in results else None
            if dtype == torch.float32:
                tol = 1e-4
            else:  # SPEC.md, bf16 inputs: o rounded to bf16; a chunked final state 2.5e-3
                tol = max(2.5e-3 if what.startswith("state") else 4e-3, 2 * (peer or 0.0))
            ok = ours <= tol and results["gdn"][what].shape == ref.shape
            failed |= not ok
            peer_text = "-" if peer is None else f"{peer:.1e}"
            print(f"{str(dtype)[6:]:<10}{what:<22}{ours:>10.1e}{peer_text:>10}{tol:>11.1e}  "
                  f"{'ok' if ok else 'FAIL'}")
    print("\nFAILED" if failed else "\nall checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
