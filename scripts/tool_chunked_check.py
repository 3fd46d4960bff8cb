#!/usr/bin/env python3
"""`gdn run --path chunked` on a safetensors file, against `gdn run --path recurrent` on the same
file (the recurrent kernel is f32-exact up to o's rounding): writes an f16 input file (N = 2
sequences of T = 1000 tokens, Hk = 2, Hv = 4, K = V = 128, f32 gates and initial state), runs
both paths on the cuda backend and prints the relative L2 difference of o and final_state.
Pure Python + NumPy (the safetensors layout is an 8-byte header length, a JSON header, data).

    python3 scripts/tool_chunked_check.py --gdn build/bin/gdn [--dir DIR]
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

DT = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}


def write(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        code = {np.dtype(v): k for k, v in DT.items()}[a.dtype]
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, out = json.loads(raw[8:8 + n]), {}
    for name, m in header.items():
        if name == "__metadata__":
            continue
        if m["dtype"] == "BF16":
            bits = np.frombuffer(raw[8 + n + m["data_offsets"][0]:8 + n + m["data_offsets"][1]], np.uint16)
            out[name] = (bits.astype(np.uint32) << 16).view(np.float32).reshape(m["shape"])
            continue
        a, b = m["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], DT[m["dtype"]]).reshape(m["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gdn", default="build/bin/gdn")
    ap.add_argument("--dir", default="/tmp/gdn-tool-chunked")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(7)
    N, T, Hk, Hv, K = 2, 1000, 2, 4, 128
    k = rng.standard_normal((N, T, Hk, K))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    src = os.path.join(args.dir, "in.safetensors")
    write(src, {
        "q": rng.standard_normal((N, T, Hk, K)).astype(np.float16),
        "k": k.astype(np.float16),
        "v": rng.standard_normal((N, T, Hv, K)).astype(np.float16),
        "g": np.log(1 / (1 + np.exp(-rng.standard_normal((N, T, Hv))))).astype(np.float32),
        "beta": (1 / (1 + np.exp(-rng.standard_normal((N, T, Hv))))).astype(np.float32),
        "initial_state": (0.1 * rng.standard_normal((N, Hv, K, K))).astype(np.float32),
    })
    out = {}
    for path in ("chunked", "recurrent"):
        dst = os.path.join(args.dir, f"{path}.safetensors")
        cmd = [args.gdn, "run", "--in", src, "--out", dst, "--backend", "cuda", "--path", path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(" ".join(cmd[1:]), "-> rc", r.returncode, r.stdout.strip(), r.stderr.strip())
        if r.returncode != 0:
            return 1
        out[path] = read(dst)
    rel = lambda a, b: float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))  # noqa: E731
    eo = rel(out["chunked"]["o"], out["recurrent"]["o"])
    es = rel(out["chunked"]["final_state"], out["recurrent"]["final_state"])
    print(f"gdn run --path chunked vs --path recurrent: o {eo:.3e}, final_state {es:.3e}")
    return 0 if eo < 3e-3 and es < 2.5e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
