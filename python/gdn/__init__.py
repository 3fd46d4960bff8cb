"""gdn: Gated DeltaNet kernels (CPU and CUDA) for any DLPack array.

    import gdn
    o, final_state, _ = gdn.forward(q, k, v, g, beta, initial_state=h0, output_final_state=True)

gdn.forward takes the library's whole option set (SPEC.md); gdn.fla has drop-in replacements for
flash-linear-attention's chunk_gated_delta_rule and fused_recurrent_gated_delta_rule.
"""

from __future__ import annotations

from . import _gdn
from ._forward import ForwardOutput, forward
from .errors import (BackendUnavailableError, DeviceError, GdnError, InternalError,
                     InvalidArgumentError, UnsupportedError, WorkspaceTooSmallError, error_for)

__version__: str = _gdn.version_string()

ERROR_FLAG_CU_SEQLENS: int = _gdn.ERROR_FLAG_CU_SEQLENS
ERROR_FLAG_STATE_INDICES: int = _gdn.ERROR_FLAG_STATE_INDICES
ERROR_FLAG_SNAPSHOT_INDICES: int = _gdn.ERROR_FLAG_SNAPSHOT_INDICES
CHECKPOINT_TOKENS: int = _gdn.CHECKPOINT_TOKENS  # the token unit of forward(checkpoint_every=n)


def version() -> str:
    """The version of the library actually loaded ("major.minor.patch")."""
    return _gdn.version_string()


def backend_available(backend: str) -> bool:
    """Whether a backend ("cpu", "cuda", "reference") is compiled in and usable now."""
    number = _gdn.BACKEND.get(backend)
    if number is None:
        raise InvalidArgumentError(f"backend: {backend!r} is not one of {', '.join(_gdn.BACKEND)}")
    return _gdn.backend_available(number)


def cuda_device_count() -> int:
    """Number of CUDA devices (0 without the CUDA backend or a GPU)."""
    return _gdn.cuda_device_count()


def cuda_device_info(index: int = 0) -> str:
    """One line describing CUDA device `index` (name, SMs, memory)."""
    status, text = _gdn.cuda_device_info(index)
    if status:
        raise error_for(status, text)
    return text


def cpu_simd_target() -> str:
    """The SIMD target the CPU backend dispatches to ("avx512bf16", "avx512", "avx2", "sse2",
    "neon" or "scalar")."""
    return _gdn.cpu_simd_target()


__all__ = [
    "forward", "ForwardOutput", "GdnError", "InvalidArgumentError", "UnsupportedError",
    "BackendUnavailableError", "WorkspaceTooSmallError", "DeviceError", "InternalError",
    "version", "backend_available", "cuda_device_count", "cuda_device_info", "cpu_simd_target",
    "ERROR_FLAG_CU_SEQLENS", "ERROR_FLAG_STATE_INDICES", "ERROR_FLAG_SNAPSHOT_INDICES", "CHECKPOINT_TOKENS",
]
