"""gdn.fla: flash-linear-attention's functions, names and conventions, on NumPy arrays (the
shims are framework-neutral; test_torch.py runs them on torch tensors)."""

import inspect
import warnings

import numpy as np
import pytest

import gdn
from gdn import fla
from recurrence import inputs, random_state, recurrence, rel_err

B, T, H, HV, K, V = 2, 5, 2, 4, 16, 8
TOL = 1e-5
FUNCTIONS = [fla.chunk_gated_delta_rule, fla.fused_recurrent_gated_delta_rule]


def test_signatures_follow_fla_0_6_0():
    chunk = list(inspect.signature(fla.chunk_gated_delta_rule).parameters)
    assert chunk == ["q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                     "use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                     "state_v_first", "cu_seqlens", "cu_seqlens_cpu", "chunk_indices",
                     "cp_context", "kwargs"]
    recurrent = list(inspect.signature(fla.fused_recurrent_gated_delta_rule).parameters)
    assert recurrent == ["q", "k", "v", "g", "gk", "gv", "beta", "scale", "initial_state",
                         "output_final_state", "use_qk_l2norm_in_kernel", "use_gate_in_kernel",
                         "A_log", "dt_bias", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                         "state_v_first", "cu_seqlens", "kwargs"]
    assert fla.chunk_gdn is fla.chunk_gated_delta_rule
    assert fla.fused_recurrent_gdn is fla.fused_recurrent_gated_delta_rule


@pytest.mark.parametrize("func", FUNCTIONS)
@pytest.mark.parametrize("state_v_first", [False, True])
def test_dense_with_initial_state(func, state_v_first):
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=30)
    layout = "vk" if state_v_first else "kv"
    h0 = random_state(B, HV, *((V, K) if state_v_first else (K, V)))
    o, ht = func(q, k, v, g, beta=beta, initial_state=h0, output_final_state=True,
                 state_v_first=state_v_first)
    assert o.shape == (B, T, HV, V) and o.dtype == q.dtype
    assert ht.shape == h0.shape and ht.dtype == np.float32
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0, state_layout=layout)
    assert rel_err(o, ref_o) <= TOL and rel_err(ht, ref_s) <= TOL


@pytest.mark.parametrize("func", FUNCTIONS)
def test_packed_returns_batch_of_one(func):
    cu = np.array([0, 3, 4, 9], np.int64)
    q, k, v, g, beta = (x[None] for x in inputs(1, 9, H, HV, K, V, packed=True, seed=31))
    o, ht = func(q, k, v, g, beta=beta, cu_seqlens=cu, output_final_state=True)
    assert o.shape == (1, 9, HV, V) and ht.shape == (3, HV, K, V)
    for n, (bos, eos) in enumerate(zip(cu[:-1], cu[1:])):
        ref_o, ref_s, _ = recurrence(*(x[:, bos:eos] for x in (q, k, v, g, beta)),
                                     state_layout="kv")
        assert rel_err(o[0, bos:eos], ref_o[0]) <= TOL
        assert rel_err(ht[n], ref_s[0]) <= TOL


@pytest.mark.parametrize("func", FUNCTIONS)
def test_final_state_only_when_asked(func):
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    o, ht = func(q, k, v, g, beta=beta)  # beta is not fused_recurrent's fifth parameter
    assert ht is None


def test_scale_l2norm_and_beta_logits():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=32)
    logits = np.random.default_rng(33).standard_normal((B, T, HV)).astype(np.float32)
    for func in FUNCTIONS:
        o, _ = func(q, 2.0 * k, v, g, beta=logits, scale=0.25, use_qk_l2norm_in_kernel=True,
                    use_beta_sigmoid_in_kernel=True)
        ref = recurrence(q, 2.0 * k, v, g, logits, scale=0.25, qk_l2norm=True, beta_mode="logit")
        assert rel_err(o, ref[0]) <= TOL


@pytest.mark.parametrize("func", FUNCTIONS)
def test_gate_in_kernel(func):
    q, k, v, _, beta = inputs(B, T, H, HV, K, V, seed=34)
    rng = np.random.default_rng(35)
    a = rng.standard_normal((B, T, HV)).astype(np.float32)
    A_log = np.log(rng.uniform(1, 16, HV)).astype(np.float32)
    dt_bias = rng.standard_normal(HV).astype(np.float32)
    o, _ = func(q, k, v, a, beta=beta, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
    ref = recurrence(q, k, v, None, beta, a=a, A_log=A_log, dt_bias=dt_bias, gate="raw")[0]
    assert rel_err(o, ref) <= TOL
    o, _ = func(q, k, v, a, beta=beta, use_gate_in_kernel=True, A_log=A_log)  # no dt_bias
    ref = recurrence(q, k, v, None, beta, a=a, A_log=A_log, dt_bias=np.zeros(HV), gate="raw")[0]
    assert rel_err(o, ref) <= TOL


def test_fused_recurrent_defaults_no_decay_and_unit_beta():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=36)
    o, _ = fla.fused_recurrent_gated_delta_rule(q, k, v)
    ref = recurrence(q, k, v, np.zeros_like(g), np.ones_like(beta))[0]
    assert rel_err(o, ref) <= TOL


def test_initial_state_of_another_dtype_is_read_as_float32():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=37)
    h0 = random_state(B, HV, K, V).astype(np.float16)
    o, ht = fla.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                       output_final_state=True)
    assert ht.dtype == np.float32
    ref = recurrence(q, k, v, g, beta, initial_state=h0, state_layout="kv")
    assert rel_err(o, ref[0]) <= TOL and rel_err(ht, ref[1]) <= TOL


def test_deprecated_transpose_state_layout():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    h0 = random_state(B, HV, V, K)
    with pytest.warns(DeprecationWarning, match="state_v_first"):
        _, ht = fla.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                           output_final_state=True, transpose_state_layout=True)
    assert ht.shape == (B, HV, V, K)
    with pytest.raises(ValueError, match="both"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta, state_v_first=True,
                                   transpose_state_layout=True)


def test_unknown_keywords_are_ignored_like_fla():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fla.chunk_gated_delta_rule(q, k, v, g, beta, position_ids=None, output_attentions=False,
                                   chunk_size=32, cu_seqlens_cpu=None, chunk_indices=None)


UNSUPPORTED = [
    (fla.fused_recurrent_gated_delta_rule, dict(gk=np.zeros((B, T, HV, K), np.float32)), "gk"),
    (fla.fused_recurrent_gated_delta_rule, dict(gv=np.zeros((B, T, HV, V), np.float32)), "gv"),
    (fla.fused_recurrent_gated_delta_rule,
     dict(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True), "allow_neg_eigval"),
    (fla.chunk_gated_delta_rule,
     dict(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True), "allow_neg_eigval"),
    (fla.chunk_gated_delta_rule, dict(cp_context=object()), "cp_context"),
    (fla.chunk_gated_delta_rule, dict(head_first=False), "head_first"),
]


@pytest.mark.parametrize("func, extra, name", UNSUPPORTED)
def test_unsupported_arguments_are_named(func, extra, name):
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.UnsupportedError, match=name):
        func(q, k, v, g, beta=beta, **extra)


def test_per_channel_beta_is_unsupported():
    q, k, v, g, _ = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.UnsupportedError, match="beta"):
        fla.fused_recurrent_gated_delta_rule(q, k, v, g, beta=np.ones((B, T, HV, V), np.float32))


def test_packed_needs_batch_of_one():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.InvalidArgumentError, match="batch size must be 1"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=np.array([0, 5, 10]))


def test_gate_in_kernel_needs_A_log():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.InvalidArgumentError, match="A_log"):
        fla.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, use_gate_in_kernel=True)


def test_chunk_size_is_checked_like_fla():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.InvalidArgumentError, match="chunk_size"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=128)


def test_library_errors_pass_through():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    with pytest.raises(gdn.InvalidArgumentError, match="^v: Hv=3"):
        fla.chunk_gated_delta_rule(q, k, v[:, :, :3], g[..., :3], beta[..., :3])
