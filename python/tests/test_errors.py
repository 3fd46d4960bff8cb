"""Every rejected call raises a gdn.GdnError subclass whose message names the argument, and
writes nothing (SPEC.md "Errors")."""

import numpy as np
import pytest

import gdn
from recurrence import inputs, random_state

N, T, HK, HV, K, V = 2, 3, 2, 4, 16, 8


@pytest.fixture
def args():
    q, k, v, g, beta = inputs(N, T, HK, HV, K, V)
    return dict(q=q, k=k, v=v, g=g, beta=beta)


def packed(a):
    """The same tokens as one packed batch [N*T, ...]."""
    return {key: x.reshape((N * T,) + x.shape[2:]) for key, x in a.items()}


def call(args, **overrides):
    merged = {**args, **overrides}
    return gdn.forward(merged.pop("q"), merged.pop("k"), merged.pop("v"), merged.pop("g"),
                       merged.pop("beta"), **merged)


def test_exception_classes():
    assert issubclass(gdn.InvalidArgumentError, ValueError)
    assert issubclass(gdn.UnsupportedError, NotImplementedError)
    assert issubclass(gdn.BackendUnavailableError, RuntimeError)
    assert issubclass(gdn.DeviceError, RuntimeError)
    for cls in (gdn.InvalidArgumentError, gdn.UnsupportedError, gdn.BackendUnavailableError,
                gdn.WorkspaceTooSmallError, gdn.DeviceError, gdn.InternalError):
        assert issubclass(cls, gdn.GdnError)


# (overrides, the argument the message must start with, a fragment of the message)
LIBRARY_REJECTS = {
    "hv_not_multiple": (lambda a: dict(v=a["v"][:, :, :3], g=a["g"][..., :3],
                                       beta=a["beta"][..., :3]), "v", "not a multiple of Hk"),
    "v_dtype": (lambda a: dict(v=a["v"].astype(np.float16)), "v", "dtype"),
    "q_int_dtype": (lambda a: dict(q=a["q"].astype(np.int32)), "q", "dtype"),
    "g_dtype": (lambda a: dict(g=a["g"].astype(np.float64)), "g", "dtype"),
    "beta_missing": (lambda a: dict(beta=None), "beta", "null"),
    "g_missing": (lambda a: dict(g=None), "g", "null"),
    "g_with_raw_gate": (lambda a: dict(gate="raw", a=a["g"], A_log=np.zeros(HV, np.float32),
                                       dt_bias=np.zeros(HV, np.float32)), "g", "raw"),
    "a_without_raw_gate": (lambda a: dict(a=a["g"]), "a", "raw"),
    "k_shape": (lambda a: dict(k=a["k"][:, :2]), "k", "T"),
    "q_ndim": (lambda a: dict(q=a["q"][0]), "q", "ndim"),
    "last_stride": (lambda a: dict(q=np.zeros((N, T, HK, 2 * K), np.float32)[..., ::2]), "q",
                    "stride"),
    "cu_seqlens_start": (lambda a: dict(packed(a), cu_seqlens=np.array([1, 6], np.int32)),
                         "cu_seqlens", "expected 0"),
    "cu_seqlens_decreasing": (lambda a: dict(packed(a),
                                             cu_seqlens=np.array([0, 4, 2, 6], np.int32)),
                              "cu_seqlens", "decreases"),
    "cu_seqlens_end": (lambda a: dict(packed(a), cu_seqlens=np.array([0, 2, 7], np.int32)),
                       "cu_seqlens", "T_total"),
    "cu_seqlens_dtype": (lambda a: dict(packed(a), cu_seqlens=np.array([0, 6], np.float32)),
                         "cu_seqlens", "dtype"),
    "initial_state_shape": (lambda a: dict(initial_state=random_state(N, HV, K + 1, V)),
                            "initial_state", ""),
    "state_dtypes_differ": (lambda a: dict(initial_state=random_state(N, HV, V, K),
                                           output_final_state=True,
                                           final_state=np.zeros((N, HV, V, K), np.float64)),
                            "final_state", "dtype"),
    "state_indices_range": (lambda a: dict(initial_state=random_state(3, HV, V, K),
                                           state_indices=np.array([0, 3], np.int32)),
                            "state_indices", "outside"),
    "state_indices_duplicate": (lambda a: dict(initial_state=random_state(3, HV, V, K),
                                               state_indices=np.array([1, 1], np.int32)),
                                "state_indices", "twice"),
    "state_indices_dtype": (lambda a: dict(initial_state=random_state(3, HV, V, K),
                                           state_indices=np.array([0, 1], np.int64)),
                            "state_indices", "i32"),
    "snapshot_indices_alone": (lambda a: dict(snapshot_indices=np.zeros((N, T), np.int32)),
                               "snapshot_indices", "state_snapshots"),
    "out_dtype": (lambda a: dict(out=np.zeros((N, T, HV, V), np.float16)), "o", "dtype"),
    "scale_nan": (lambda a: dict(scale=float("nan")), "scale", "finite"),
    "num_threads": (lambda a: dict(num_threads=-1), "num_threads", "negative"),
}


@pytest.mark.parametrize("case", sorted(LIBRARY_REJECTS))
def test_library_rejects_and_writes_nothing(args, case):
    make, name, fragment = LIBRARY_REJECTS[case]
    overrides = make(args)
    v_shape = overrides.get("v", args["v"]).shape
    out = overrides.pop("out", np.full(v_shape, 3.0, np.float32))
    sentinel = out.copy()
    states = {key: overrides[key] for key in ("initial_state", "final_state") if key in overrides}
    states_before = {key: x.copy() for key, x in states.items()}
    with pytest.raises(gdn.InvalidArgumentError) as info:
        call(args, out=out, **overrides)
    message = str(info.value)
    assert message.startswith(name + ":"), message
    assert fragment in message, message
    np.testing.assert_array_equal(out, sentinel)
    for key, x in states.items():
        np.testing.assert_array_equal(x, states_before[key])


BINDING_REJECTS = {
    "gate_name": (dict(gate="exp"), "gate", "'exp' is not one of"),
    "beta_mode_name": (dict(beta_mode="softmax"), "beta_mode", "'softmax'"),
    "head_map_name": (dict(head_map="interleaved"), "head_map", "'interleaved'"),
    "state_layout_name": (dict(state_layout="kvk"), "state_layout", "'kvk'"),
    "backend_name": (dict(backend="metal"), "backend", "'metal'"),
    "path_name": (dict(path="parallel"), "path", "'parallel'"),
    "scale_zero": (dict(scale=0.0), "scale", "0"),
    "not_an_array": (dict(beta=[[0.5]]), "beta", "DLPack"),
    "dtype_unsupported": (dict(beta=np.zeros((N, T, HV), np.uint8)), "beta", "uint8"),
    "complex": (dict(g=np.zeros((N, T, HV), np.complex64)), "g", "complex64"),
    "zero_dim": (dict(g=np.ones((), np.float32)), "g", "ndim=0"),
    "broadcast": (dict(g=np.broadcast_to(np.float32(-0.1), (N, T, HV))), "g", "broadcast"),
    "read_only_out": (dict(out=np.zeros((N, T, HV, V), np.float32)), "out", "read-only"),
    "stream_type": (dict(stream="default"), "stream", "cudaStream_t"),
    "error_flags_dtype": (dict(error_flags=np.zeros(1, np.float32)), "error_flags", "int32"),
    "pool_final_state": (dict(initial_state=random_state(3, HV, V, K),
                              state_indices=np.array([0, 1], np.int32), output_final_state=True),
                         "final_state", "pool"),
    "pool_snapshots": (dict(snapshot_indices=np.zeros((N, T), np.int32),
                            output_state_snapshots=True), "state_snapshots", "pool"),
}


@pytest.mark.parametrize("case", sorted(BINDING_REJECTS))
def test_binding_rejects(args, case):
    overrides, name, fragment = BINDING_REJECTS[case]
    if case == "read_only_out":
        overrides["out"].flags.writeable = False
    with pytest.raises(gdn.InvalidArgumentError) as info:
        call(args, **overrides)
    message = str(info.value)
    assert message.startswith(name + ":"), message
    assert fragment in message, message


def test_read_only_inputs_are_accepted(args):
    for x in args.values():
        x.flags.writeable = False
    assert call(args).o.shape == (N, T, HV, V)


def test_error_flags_word_is_accepted_on_the_host(args):
    flags = np.zeros(1, np.uint32)
    call(args, error_flags=flags)
    assert flags[0] == 0


def test_cuda_backend_refuses_host_memory(args):
    with pytest.raises(gdn.InvalidArgumentError, match="^q: device_type cpu"):
        call(args, backend="cuda")
