"""torch CPU tensors through DLPack: gdn.forward, gdn.fla, and agreement with transformers'
Qwen3-Next torch reference functions. Skipped where torch is not installed."""

import numpy as np
import pytest

import gdn
from gdn import fla
from recurrence import inputs, random_state, recurrence, rel_err

torch = pytest.importorskip("torch")

B, T, H, HV, K, V = 2, 6, 2, 4, 16, 8
TOL = 1e-5


def tensors(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(x)) for x in arrays]


def test_forward_allocates_torch_outputs():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    tq, tk, tv, tg, tb = tensors(q, k, v, g, beta)
    o, ht, _ = gdn.forward(tq, tk, tv, tg, tb, output_final_state=True)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32 and o.device.type == "cpu"
    assert ht.dtype == torch.float32 and ht.shape == (B, HV, V, K)
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta)
    assert rel_err(o.numpy(), ref_o) <= TOL and rel_err(ht.numpy(), ref_s) <= TOL


def test_bfloat16_tensors():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=40)
    tq, tk, tv = (x.to(torch.bfloat16) for x in tensors(q, k, v))
    tg, tb = tensors(g, beta)
    o, ht, _ = gdn.forward(tq, tk, tv, tg, tb, output_final_state=True)
    assert o.dtype == torch.bfloat16
    ref_o, ref_s, _ = recurrence(*(x.float().numpy() for x in (tq, tk, tv)), g, beta)
    assert rel_err(o.float().numpy(), ref_o) <= 4e-3 and rel_err(ht.numpy(), ref_s) <= TOL


def test_strided_views_and_in_place_state():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=41)
    tq, tk, tv, tg, tb = tensors(q, k, v, g, beta)
    wide = torch.zeros(B, T, H, 2 * K)
    wide[..., K:] = tq
    pool = torch.from_numpy(random_state(2 * B, HV, V, K, seed=42))
    view = pool[::2]  # every other slot: a strided state
    before = view.clone()
    gdn.forward(wide[..., K:], tk, tv, tg, tb, initial_state=view, final_state=view)
    ref_s = recurrence(q, k, v, g, beta, initial_state=before.numpy())[1]
    assert rel_err(pool[::2].numpy(), ref_s) <= TOL


def test_requires_grad_tensors_go_through_forward():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V)
    tq = torch.from_numpy(q).requires_grad_()
    o = gdn.forward(tq, *tensors(k, v, g, beta)).o
    assert not o.requires_grad  # gdn.forward is not differentiable


def test_fla_matches_on_torch_with_kv_state():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=43)
    h0 = random_state(B, HV, K, V)
    args = tensors(q, k, v, g, beta)
    for func in (fla.chunk_gated_delta_rule, fla.fused_recurrent_gated_delta_rule):
        o, ht = func(*args[:4], beta=args[4], initial_state=torch.from_numpy(h0),
                     output_final_state=True)
        ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0, state_layout="kv")
        assert rel_err(o.numpy(), ref_o) <= TOL and rel_err(ht.numpy(), ref_s) <= TOL


def test_fla_copies_a_non_contiguous_last_dimension_like_fla():
    q, k, v, g, beta = inputs(B, T, H, HV, K, V, seed=44)
    tq = torch.from_numpy(np.ascontiguousarray(q.swapaxes(-1, -2))).transpose(-1, -2)
    assert tq.stride(-1) != 1
    o, _ = fla.chunk_gated_delta_rule(tq, *tensors(k, v, g, beta))
    assert rel_err(o.numpy(), recurrence(q, k, v, g, beta)[0]) <= TOL


def test_fla_refuses_to_record_gradients():
    q, k, v, g, beta = tensors(*inputs(B, T, H, HV, K, V))
    q.requires_grad_()
    with pytest.raises(gdn.UnsupportedError, match="q requires grad"):
        fla.chunk_gated_delta_rule(q, k, v, g, beta)
    with torch.no_grad():
        o, _ = fla.chunk_gated_delta_rule(q, k, v, g, beta)
    with torch.inference_mode():
        fla.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta)


def _unwrapped(func):
    while hasattr(func, "__wrapped__"):
        func = func.__wrapped__
    return func


@pytest.mark.parametrize("name", ["torch_chunk_gated_delta_rule",
                                  "torch_recurrent_gated_delta_rule"])
def test_agrees_with_transformers_reference(name):
    modeling = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    reference = _unwrapped(getattr(modeling, name))
    q, k, v, g, beta = tensors(*inputs(B, 13, H, HV, K, V, seed=45))
    h0 = torch.from_numpy(random_state(B, HV, K, V))
    ref_o, ref_s = reference(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                             use_qk_l2norm_in_kernel=True)
    mine = fla.chunk_gated_delta_rule if "chunk" in name else fla.fused_recurrent_gated_delta_rule
    o, ht = mine(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                 use_qk_l2norm_in_kernel=True)
    assert rel_err(o.numpy(), ref_o.numpy()) <= 1e-5
    assert rel_err(ht.numpy(), ref_s.numpy()) <= 1e-5
