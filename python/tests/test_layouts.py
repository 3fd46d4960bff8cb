"""Batch structures and memory layouts: packed batches, state pools with padding, in-place
updates, snapshots, and strided views that the binding must pass through without copying."""

import numpy as np
import pytest

import gdn
from recurrence import inputs, random_state, recurrence, rel_err

HK, HV, K, V = 2, 4, 16, 8
TOL = 1e-5


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_packed_batch_matches_each_sequence(index_dtype):
    lengths = [3, 1, 6]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(index_dtype)
    q, k, v, g, beta = inputs(1, int(cu[-1]), HK, HV, K, V, packed=True, seed=11)
    h0 = random_state(len(lengths), HV, V, K)
    o, ht, _ = gdn.forward(q, k, v, g, beta, cu_seqlens=cu, initial_state=h0,
                           output_final_state=True)
    assert o.shape == (cu[-1], HV, V) and ht.shape == (len(lengths), HV, V, K)
    for n, (bos, eos) in enumerate(zip(cu[:-1], cu[1:])):
        seq = [x[None, bos:eos] for x in (q, k, v, g, beta)]
        ref_o, ref_s, _ = recurrence(*seq, initial_state=h0[n:n + 1])
        assert rel_err(o[bos:eos], ref_o[0]) <= TOL
        assert rel_err(ht[n], ref_s[0]) <= TOL


def test_pool_with_padding_in_place():
    n, t, pool = 3, 4, 5
    q, k, v, g, beta = inputs(n, t, HK, HV, K, V, seed=12)
    states = random_state(pool, HV, V, K, seed=13)
    before = states.copy()
    slots = np.array([4, -1, 1], np.int32)  # sequence 1 is padding
    o, ht, _ = gdn.forward(q, k, v, g, beta, initial_state=states, final_state=states,
                           state_indices=slots)
    assert ht is states
    for seq, slot in enumerate(slots):
        if slot < 0:
            assert not o[seq].any(), "a padded sequence's outputs are zero"
            continue
        ref_o, ref_s, _ = recurrence(*(x[seq:seq + 1] for x in (q, k, v, g, beta)),
                                     initial_state=before[slot:slot + 1])
        assert rel_err(o[seq], ref_o[0]) <= TOL
        assert rel_err(states[slot], ref_s[0]) <= TOL
    untouched = [s for s in range(pool) if s not in slots]
    np.testing.assert_array_equal(states[untouched], before[untouched])


def test_pool_into_a_second_pool():
    n, t, pool = 2, 3, 4
    q, k, v, g, beta = inputs(n, t, HK, HV, K, V, seed=14)
    h0 = random_state(pool, HV, V, K, seed=15)
    ht = np.full_like(h0, 7.0)
    slots = np.array([2, 0], np.int32)
    gdn.forward(q, k, v, g, beta, initial_state=h0, final_state=ht, state_indices=slots)
    for seq, slot in enumerate(slots):
        ref_s = recurrence(*(x[seq:seq + 1] for x in (q, k, v, g, beta)),
                           initial_state=h0[slot:slot + 1])[1]
        assert rel_err(ht[slot], ref_s[0]) <= TOL
    assert (ht[[1, 3]] == 7.0).all()


def test_dense_in_place_update():
    q, k, v, g, beta = inputs(2, 5, HK, HV, K, V, seed=16)
    state = random_state(2, HV, V, K, seed=17)
    ref_s = recurrence(q, k, v, g, beta, initial_state=state)[1]
    gdn.forward(q, k, v, g, beta, initial_state=state, final_state=state)
    assert rel_err(state, ref_s) <= TOL


@pytest.mark.parametrize("state_layout", ["vk", "kv"])
def test_dense_snapshots(state_layout):
    q, k, v, g, beta = inputs(2, 5, HK, HV, K, V, seed=18)
    o, ht, snaps = gdn.forward(q, k, v, g, beta, output_final_state=True,
                               output_state_snapshots=True, state_layout=state_layout)
    rows, cols = (V, K) if state_layout == "vk" else (K, V)
    assert snaps.shape == (2, 5, HV, rows, cols)
    ref_snaps = recurrence(q, k, v, g, beta, state_layout=state_layout)[2]
    assert rel_err(snaps, ref_snaps) <= TOL
    np.testing.assert_array_equal(snaps[:, -1], ht)


def test_packed_snapshots():
    cu = np.array([0, 2, 5], np.int32)
    q, k, v, g, beta = inputs(1, 5, HK, HV, K, V, packed=True, seed=19)
    snaps = gdn.forward(q, k, v, g, beta, cu_seqlens=cu,
                        output_state_snapshots=True).state_snapshots
    assert snaps.shape == (5, HV, V, K)
    for bos, eos in zip(cu[:-1], cu[1:]):
        ref = recurrence(*(x[None, bos:eos] for x in (q, k, v, g, beta)))[2]
        assert rel_err(snaps[bos:eos], ref[0]) <= TOL


def test_pooled_snapshots():
    n, t, pool = 2, 3, 8
    q, k, v, g, beta = inputs(n, t, HK, HV, K, V, seed=20)
    snap_pool = np.zeros((pool, HV, V, K), np.float32)
    where = np.array([[0, -1, 5], [2, 3, -1]], np.int32)  # -1: not stored
    gdn.forward(q, k, v, g, beta, state_snapshots=snap_pool, snapshot_indices=where)
    ref = recurrence(q, k, v, g, beta)[2]
    for seq in range(n):
        for tok in range(t):
            if where[seq, tok] >= 0:
                assert rel_err(snap_pool[where[seq, tok]], ref[seq, tok]) <= TOL
    assert not snap_pool[[1, 4, 6, 7]].any()


def test_strided_inputs_and_outputs_are_used_in_place():
    n, t = 2, 4
    q, k, v, g, beta = inputs(n, t, HK, HV, K, V, seed=21)
    # Views into larger buffers: every outer dimension strided, the last one contiguous.
    big_q = np.zeros((n, 2 * t, HK + 1, K + 4), np.float32)
    big_q[:, ::2, :HK, :K] = q
    q_view = big_q[:, ::2, :HK, :K]
    big_state = np.zeros((n, 3, HV, V, K), np.float32)  # a state slot interleaved with others
    state_view = big_state[:, 1]
    big_out = np.full((n, t, HV, 2 * V), 5.0, np.float32)
    out_view = big_out[..., :V]
    assert not q_view.flags.c_contiguous and not out_view.flags.c_contiguous
    o, ht, _ = gdn.forward(q_view, k, v, g, beta, out=out_view, final_state=state_view)
    assert o is out_view and ht is state_view
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta)
    assert rel_err(big_out[..., :V], ref_o) <= TOL, "o landed in the caller's buffer"
    assert (big_out[..., V:] == 5.0).all()
    assert rel_err(big_state[:, 1], ref_s) <= TOL, "the state landed in the caller's buffer"
    assert not big_state[:, [0, 2]].any()


def test_size_one_dimensions_with_odd_strides():
    q, k, v, g, beta = inputs(1, 1, 1, 1, K, V, seed=22)
    g_odd = np.lib.stride_tricks.as_strided(g, shape=(1, 1, 1), strides=(0, 0, 0))
    o = gdn.forward(q, k, v, g_odd, beta).o
    assert rel_err(o, recurrence(q, k, v, g, beta)[0]) <= TOL
