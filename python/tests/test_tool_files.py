"""`gdn run` on safetensors files written by another program (Python's `safetensors`), for every
option, checked against the independent NumPy recurrence of recurrence.py.

Needs the built tool (GDN_TOOL, or build/bin/gdn in the repository) and the `safetensors`
package; skips otherwise.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import numpy as np
import pytest

from recurrence import inputs, random_state, recurrence, rel_err

st = pytest.importorskip("safetensors.numpy")

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = pathlib.Path(os.environ.get("GDN_TOOL", REPO / "build" / "bin" / "gdn"))
pytestmark = pytest.mark.skipif(not TOOL.is_file(), reason=f"the gdn tool is not built ({TOOL})")

N, T, HK, HV, K, V = 3, 11, 2, 6, 16, 8  # ratio 3


def run_tool(tmp_path, tensors, *options):
    """Writes `tensors` with Python's safetensors, runs `gdn run` on them, reads the result."""
    fin, fout = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    st.save_file({name: np.ascontiguousarray(x) for name, x in tensors.items()}, str(fin))
    proc = subprocess.run([str(TOOL), "run", "--in", str(fin), "--out", str(fout), "--backend", "cpu", *options],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return st.load_file(str(fout))


@pytest.mark.parametrize("gate", ["log_decay", "decay_rate", "raw"])
@pytest.mark.parametrize("head_map", ["block", "tiled"])
@pytest.mark.parametrize("state_layout", ["vk", "kv"])
def test_dense_every_convention(tmp_path, gate, head_map, state_layout):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=3)
    h0 = random_state(N, HV, *((V, K) if state_layout == "vk" else (K, V)))
    tensors = dict(q=q, k=k, v=v, beta=beta, initial_state=h0)
    options = ["--gate", gate, "--head-map", head_map, "--state-layout", state_layout]
    kwargs = dict(gate=gate, head_map=head_map, state_layout=state_layout)
    if gate == "raw":
        rng = np.random.default_rng(4)
        a = rng.standard_normal((N, T, HV)).astype(np.float32)
        A_log = rng.uniform(-1, 1, HV).astype(np.float32)
        dt_bias = (0.5 * rng.standard_normal(HV)).astype(np.float32)
        tensors.update(a=a, A_log=A_log, dt_bias=dt_bias)
        kwargs.update(a=a, A_log=A_log, dt_bias=dt_bias)
    else:
        g = -g if gate == "decay_rate" else g
        tensors["g"] = g
        kwargs["g"] = g
    out = run_tool(tmp_path, tensors, *options)
    o, s, _ = recurrence(q, k, v, beta=beta, initial_state=h0, **kwargs)
    assert rel_err(out["o"], o) < 1e-5
    assert rel_err(out["final_state"], s) < 1e-5


def test_logit_beta_l2norm_scale_f16(tmp_path):
    q, k, v, g, b = inputs(N, T, HK, HV, K, V, seed=5, dtype=np.float16)
    out = run_tool(tmp_path, dict(q=q, k=k, v=v, g=g, beta=b),
                   "--beta", "logit", "--qk-l2norm", "--scale", "0.3", "--final-state")
    assert out["o"].dtype == np.float16  # o has q's dtype
    o, s, _ = recurrence(q, k, v, g, b, beta_mode="logit", qk_l2norm=True, scale=0.3)
    assert rel_err(out["o"], o) < 4e-3
    assert rel_err(out["final_state"], s) < 1e-5


def test_packed_with_an_empty_sequence(tmp_path):
    lengths = [4, 0, 7]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    q, k, v, g, beta = inputs(1, int(cu[-1]), HK, HV, K, V, seed=6, packed=True)
    h0 = random_state(len(lengths), HV, V, K)
    out = run_tool(tmp_path, dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, cu_seqlens=cu))
    for n, (lo, hi) in enumerate(zip(cu[:-1], cu[1:])):
        o, s, _ = recurrence(*(x[None, lo:hi] for x in (q, k, v, g, beta)), initial_state=h0[n:n + 1])
        if hi > lo:
            assert rel_err(out["o"][lo:hi], o[0]) < 1e-5
        assert rel_err(out["final_state"][n], s[0]) < 1e-5  # empty: the initial state


def test_pool_with_padding_updated_in_place_and_snapshots(tmp_path):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=7)
    pool = random_state(5, HV, V, K)
    slots = np.array([3, -1, 0], dtype=np.int32)  # the middle entry is padding
    out = run_tool(tmp_path, dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=pool, state_indices=slots),
                   "--snapshots")
    for n, slot in enumerate(slots):
        if slot < 0:
            assert not out["o"][n].any()  # padding: outputs zero
            continue
        o, s, snaps = recurrence(*(x[n:n + 1] for x in (q, k, v, g, beta)), initial_state=pool[slot:slot + 1])
        assert rel_err(out["o"][n], o[0]) < 1e-5
        assert rel_err(out["final_state"][slot], s[0]) < 1e-5
        assert rel_err(out["state_snapshots"][n], snaps[0]) < 1e-5
    for untouched in (1, 2, 4):  # slots no sequence addresses keep their bytes
        assert np.array_equal(out["final_state"][untouched], pool[untouched])


def test_bad_file_writes_nothing(tmp_path):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=8)
    fin, fout = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    st.save_file(dict(q=q, k=k, v=v[:, :, :5], g=g, beta=beta), str(fin))  # Hv = 5: not a multiple of Hk
    proc = subprocess.run([str(TOOL), "run", "--in", str(fin), "--out", str(fout)], capture_output=True, text=True)
    assert proc.returncode != 0 and "Hv" in proc.stderr
    assert not fout.exists()
