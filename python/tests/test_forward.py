"""gdn.forward on NumPy arrays against the float64 NumPy recurrence: options and dtypes."""

import numpy as np
import pytest

import gdn
from recurrence import inputs, random_state, recurrence, rel_err

N, T, HK, HV, K, V = 2, 7, 2, 4, 16, 8
F32_TOL = 1e-5  # SPEC.md: recurrent path, f32 inputs, output and state


def test_module_info():
    assert gdn.__version__ == gdn.version() == "0.1.0"
    assert gdn.backend_available("cpu") and gdn.backend_available("reference")
    assert isinstance(gdn.cpu_simd_target(), str)
    assert gdn.cuda_device_count() >= 0
    with pytest.raises(gdn.InvalidArgumentError, match="^backend: 'tpu'"):
        gdn.backend_available("tpu")


@pytest.mark.parametrize("backend", ["auto", "cpu", "reference"])
def test_dense_f32(backend):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V)
    h0 = random_state(N, HV, V, K)
    o, ht, snaps = gdn.forward(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                               backend=backend)
    assert snaps is None
    assert o.shape == (N, T, HV, V) and o.dtype == np.float32
    assert ht.shape == (N, HV, V, K) and ht.dtype == np.float32
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ref_o) <= F32_TOL
    assert rel_err(ht, ref_s) <= F32_TOL


def test_reference_backend_float64():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, dtype=np.float64)
    g, beta = g.astype(np.float64), beta.astype(np.float64)
    h0 = random_state(N, HV, V, K, dtype=np.float64)
    o, ht, _ = gdn.forward(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                           backend="reference")
    assert o.dtype == np.float64 and ht.dtype == np.float64
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ref_o) <= 1e-12
    assert rel_err(ht, ref_s) <= 1e-12


def test_reference_backend_writes_float64_output_for_f32_inputs():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V)
    out = np.empty((N, T, HV, V), np.float64)
    o = gdn.forward(q, k, v, g, beta, out=out, backend="reference").o
    assert o is out
    assert rel_err(out, recurrence(q, k, v, g, beta)[0]) <= 1e-12


def test_default_output_is_o_only():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V)
    result = gdn.forward(q, k, v, g, beta)
    assert isinstance(result, gdn.ForwardOutput)
    assert result.final_state is None and result.state_snapshots is None


@pytest.mark.parametrize("gate", ["log_decay", "decay_rate", "raw"])
@pytest.mark.parametrize("beta_mode", ["prob", "logit"])
def test_gates_and_beta_modes(gate, beta_mode):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=3)
    rng = np.random.default_rng(4)
    extra = {}
    if gate == "decay_rate":
        g = -g
    elif gate == "raw":
        extra = dict(a=rng.standard_normal((N, T, HV)).astype(np.float32),
                     A_log=np.log(rng.uniform(1, 16, HV)).astype(np.float32),
                     dt_bias=rng.standard_normal(HV).astype(np.float32))
        g = None
    if beta_mode == "logit":
        beta = rng.standard_normal((N, T, HV)).astype(np.float32)
    o, ht, _ = gdn.forward(q, k, v, g, beta, gate=gate, beta_mode=beta_mode,
                           output_final_state=True, **extra)
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, gate=gate, beta_mode=beta_mode, **extra)
    assert rel_err(o, ref_o) <= F32_TOL
    assert rel_err(ht, ref_s) <= F32_TOL


@pytest.mark.parametrize("head_map", ["block", "tiled"])
@pytest.mark.parametrize("state_layout", ["vk", "kv"])
def test_head_maps_and_state_layouts(head_map, state_layout):
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=5)
    rows, cols = (V, K) if state_layout == "vk" else (K, V)
    h0 = random_state(N, HV, rows, cols)
    o, ht, _ = gdn.forward(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                           head_map=head_map, state_layout=state_layout)
    assert ht.shape == (N, HV, rows, cols)
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0, head_map=head_map,
                                 state_layout=state_layout)
    assert rel_err(o, ref_o) <= F32_TOL
    assert rel_err(ht, ref_s) <= F32_TOL


def test_state_layout_kv_shape_without_initial_state():
    q, k, v, g, beta = inputs(1, 3, 1, 1, 16, 8)
    ht = gdn.forward(q, k, v, g, beta, state_layout="kv", output_final_state=True).final_state
    assert ht.shape == (1, 1, 16, 8)


def test_qk_l2norm_and_scale():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=6)
    k = k * 3.0  # no longer unit length: the normalisation matters
    o = gdn.forward(q, k, v, g, beta, qk_l2norm=True, scale=0.3).o
    assert rel_err(o, recurrence(q, k, v, g, beta, qk_l2norm=True, scale=0.3)[0]) <= F32_TOL


def test_no_decay_and_fast_decay_heads():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=7)
    g[:, :, 0] = 0.0
    g[:, :, 1] = -20.0
    o = gdn.forward(q, k, v, g, beta).o
    assert rel_err(o, recurrence(q, k, v, g, beta)[0]) <= F32_TOL


def test_gate_and_beta_in_input_dtype_f16():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, dtype=np.float16, seed=8)
    g, beta = g.astype(np.float16), beta.astype(np.float16)
    o, ht, _ = gdn.forward(q, k, v, g, beta, output_final_state=True)
    assert o.dtype == np.float16 and ht.dtype == np.float32
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta)
    assert rel_err(o, ref_o) <= 4e-3
    assert rel_err(ht, ref_s) <= F32_TOL


def test_bfloat16_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V, seed=9)
    q, k, v = (x.astype(bf16) for x in (q, k, v))
    h0 = random_state(N, HV, V, K).astype(bf16)
    o, ht, _ = gdn.forward(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    assert o.dtype == bf16 and ht.dtype == bf16
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(o, ref_o) <= 4e-3  # the output's rounding to bf16
    assert rel_err(ht, ref_s) <= 4e-3  # the bf16 state is rounded once, at the end


def test_num_threads_and_ignored_stream_for_host_arrays():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V)
    o1 = gdn.forward(q, k, v, g, beta, num_threads=1).o
    o2 = gdn.forward(q, k, v, g, beta, stream=0).o
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_checkpoints_every_n_chunks(backend):
    # the state after every 64 n tokens only; the other snapshot entries keep what they held
    n_seq, t_len, every = 2, 2 * gdn.CHECKPOINT_TOKENS + 5, 1
    q, k, v, g, beta = inputs(n_seq, t_len, HK, HV, K, V)
    snaps = np.full((n_seq, t_len, HV, V, K), 7.0, dtype=np.float32)
    gdn.forward(q, k, v, g, beta, state_snapshots=snaps, checkpoint_every=every, backend=backend)
    _, _, ref = recurrence(q, k, v, g, beta)
    stored = [t for t in range(t_len) if (t + 1) % (every * gdn.CHECKPOINT_TOKENS) == 0]
    assert stored == [63, 127]
    assert rel_err(snaps[:, stored], ref[:, stored]) <= F32_TOL
    others = np.delete(snaps, stored, axis=1)
    assert np.all(others == 7.0)
    with pytest.raises(gdn.InvalidArgumentError, match="^chunk_checkpoint_every: 2 .*state_snapshots"):
        gdn.forward(q, k, v, g, beta, checkpoint_every=2, backend=backend)
