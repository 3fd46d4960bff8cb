"""libgdn's C API (include/gdn/gdn.h) through ctypes, for the benchmark scripts: the structs
mirrored field by field, torch tensors as gdn_tensor views, and the forward call.

    import gdn_ctypes as gdn
    lib = gdn.Gdn("build/lib/libgdn.so")
    a = gdn.ForwardArgs(); a.q = gdn.tensor(q); ...; a.backend = gdn.BACKEND_CUDA
    lib.forward(a)  # on torch's current stream; raises RuntimeError with gdn_last_error()
"""
import ctypes

import torch

# ---- enums (fixed numeric values: part of the ABI)
MAX_DIMS = 5
DTYPE = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4, torch.int64: 5,
         torch.float64: 6}
DEVICE_CPU, DEVICE_CUDA = 1, 2
GATE_LOG_DECAY, GATE_DECAY_RATE, GATE_RAW = 0, 1, 2
BETA_PROB, BETA_LOGIT = 0, 1
HEAD_MAP_BLOCK, HEAD_MAP_TILED = 0, 1
STATE_VK, STATE_KV = 0, 1
BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA, BACKEND_REFERENCE = 0, 1, 2, 3
CHECKPOINT_TOKENS = 64  # GDN_CHECKPOINT_TOKENS: chunk_checkpoint_every counts in these
PATH_AUTO, PATH_RECURRENT, PATH_CHUNKED = 0, 1, 2
ERROR_FLAG_CU_SEQLENS, ERROR_FLAG_STATE_INDICES, ERROR_FLAG_SNAPSHOT_INDICES = 0x1, 0x2, 0x4


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS),
                ("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


TENSOR_FIELDS = ["q", "k", "v", "g", "beta", "a", "A_log", "dt_bias", "initial_state", "cu_seqlens",
                 "state_indices", "snapshot_indices", "o", "final_state", "state_snapshots"]


class ForwardArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in TENSOR_FIELDS] + [
        ("gate", ctypes.c_int), ("beta_mode", ctypes.c_int), ("head_map", ctypes.c_int),
        ("state_layout", ctypes.c_int), ("qk_l2norm", ctypes.c_int32), ("scale", ctypes.c_float),
        ("backend", ctypes.c_int), ("path", ctypes.c_int), ("host_check_indices", ctypes.c_int32),
        ("chunk_checkpoint_every", ctypes.c_int32), ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("error_flags", ctypes.c_void_p), ("num_threads", ctypes.c_int32)]


# sizeof / offsetof as the C compiler lays gdn.h out on x86-64 (checked with a C program)
assert ctypes.sizeof(Tensor) == 104 and ctypes.sizeof(ForwardArgs) == 1640, "gdn.h layout changed"
assert ForwardArgs.gate.offset == 1560 and ForwardArgs.num_threads.offset == 1632, "gdn.h layout changed"


def tensor(t):
    """A gdn_tensor view of torch tensor `t` (None: absent), strides in elements."""
    g = Tensor()
    if t is None:
        return g
    assert t.dim() <= MAX_DIMS
    g.data, g.dtype, g.ndim = t.data_ptr(), DTYPE[t.dtype], t.dim()
    for i, (s, st) in enumerate(zip(t.shape, t.stride())):
        g.shape[i], g.strides[i] = s, st
    g.device_type = DEVICE_CUDA if t.is_cuda else DEVICE_CPU
    g.device_id = (t.device.index or 0) if t.is_cuda else 0
    return g


class Gdn:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        for name in ("gdn_forward", "gdn_forward_can_implement"):
            getattr(self.lib, name).argtypes = [ctypes.POINTER(ForwardArgs)]
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.gdn_forward_workspace_size.argtypes = [ctypes.POINTER(ForwardArgs),
                                                        ctypes.POINTER(ctypes.c_size_t)]
        self.lib.gdn_forward_workspace_size.restype = ctypes.c_int
        self.lib.gdn_last_error.restype = ctypes.c_char_p
        self.lib.gdn_version_string.restype = ctypes.c_char_p
        self._workspace = None

    def version(self):
        return self.lib.gdn_version_string().decode()

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {self.lib.gdn_last_error().decode()}")

    def prepare(self, a):
        """Sets torch's current stream and a workspace of the size the call needs."""
        a.stream = torch.cuda.current_stream().cuda_stream
        size = ctypes.c_size_t(0)
        self._check(self.lib.gdn_forward_workspace_size(ctypes.byref(a), ctypes.byref(size)),
                    "gdn_forward_workspace_size")
        if size.value and (self._workspace is None or self._workspace.numel() < size.value):
            self._workspace = torch.empty(size.value, dtype=torch.uint8, device="cuda")
        a.workspace = self._workspace.data_ptr() if size.value else None
        a.workspace_bytes = size.value
        return a

    def forward(self, a):
        self._check(self.lib.gdn_forward(ctypes.byref(a)), "gdn_forward")
