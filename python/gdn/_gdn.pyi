"""Type stubs of the native module gdn._gdn (python/src/module.cpp). Use gdn.forward."""

from typing import Any, Callable, Optional, Tuple

GATE: dict[str, int]
BETA_MODE: dict[str, int]
HEAD_MAP: dict[str, int]
STATE_LAYOUT: dict[str, int]
BACKEND: dict[str, int]
PATH: dict[str, int]
STATUS: dict[str, int]
ERROR_FLAG_CU_SEQLENS: int
ERROR_FLAG_STATE_INDICES: int
ERROR_FLAG_SNAPSHOT_INDICES: int
CHECKPOINT_TOKENS: int

def forward(
    arrays: Tuple[Any, ...],
    bf16_bits: int,
    gate: int,
    beta_mode: int,
    head_map: int,
    state_layout: int,
    qk_l2norm: bool,
    scale: float,
    backend: int,
    path: int,
    host_check_indices: bool,
    error_flags: Optional[Any],
    num_threads: int,
    stream: int,
    alloc_workspace: Optional[Callable[[int], Any]],
    checkpoint_every: int = 0,
) -> Optional[Tuple[int, str]]:
    """Runs gdn_forward on 15 DLPack arrays (None when absent) in the order q, k, v, g, beta, a,
    A_log, dt_bias, initial_state, cu_seqlens, state_indices, snapshot_indices, out,
    final_state, state_snapshots. Returns None, or (status, message) on failure."""

def version() -> int: ...
def version_string() -> str: ...
def backend_available(backend: int) -> bool: ...
def cuda_device_count() -> int: ...
def cuda_device_info(index: int) -> Tuple[int, str]: ...
def cpu_simd_target() -> str: ...
def status_string(status: int) -> str: ...
