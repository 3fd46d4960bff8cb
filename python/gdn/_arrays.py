"""What the binding needs from each array library: a DLPack export that copies nothing, the
caller's current CUDA stream, and new arrays on the device of a given one.

Frameworks are recognised by the module their array type comes from and imported only when such
an array is seen: the package itself imports no framework.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Tuple

from .errors import InvalidArgumentError


class _Framework:
    """Arrays of an unknown library: anything with __dlpack__, on the legacy default stream."""

    def export(self, x: Any) -> Tuple[Any, bool]:
        """(what goes to the extension, whether it holds the uint16 bits of a bfloat16 array).
        By default the array itself: nanobind calls its __dlpack__."""
        return x, False

    def current_stream(self, x: Any) -> int:
        return 0

    def empty(self, like: Any, shape: tuple, dtype: Any) -> Any:
        raise InvalidArgumentError(
            f"cannot allocate outputs for arrays of type {type(like).__module__}."
            f"{type(like).__name__}: pass out= (and final_state= / state_snapshots=)")

    def full(self, like: Any, shape: tuple, dtype: Any, value: float) -> Any:
        return self.empty(like, shape, dtype)

    def unit_last_stride(self, x: Any) -> Any:
        """x itself; torch makes a contiguous copy when the last stride is not 1 (fla does)."""
        return x

    def float32(self, x: Any) -> Any:
        """x itself if it is float32, else a float32 copy."""
        return x if str(x.dtype).endswith("float32") else x.astype("float32")


class _NumPy(_Framework):

    def __init__(self) -> None:
        import numpy

        self.np = numpy
        self._bfloat16: dict = {}  # dtype -> whether it is ml_dtypes' bfloat16 (dtype.name is slow)

    def export(self, x: Any) -> Tuple[Any, bool]:
        # ml_dtypes' bfloat16 cannot cross DLPack: hand over its bits.
        dtype = x.dtype
        bfloat16 = self._bfloat16.get(dtype)
        if bfloat16 is None:
            bfloat16 = self._bfloat16[dtype] = dtype.name == "bfloat16"
        if bfloat16:
            return x.view(self.np.uint16), True
        return x, False

    def empty(self, like: Any, shape: tuple, dtype: Any) -> Any:
        return self.np.empty(shape, dtype=dtype)

    def full(self, like: Any, shape: tuple, dtype: Any, value: float) -> Any:
        return self.np.full(shape, value, dtype=dtype)


class _Torch(_Framework):

    def __init__(self) -> None:
        import torch
        import torch.utils.dlpack

        self.torch = torch
        # The C export: no stream synchronisation and no Python-level checks. The kernel runs on
        # the current stream, which is the one that produced the tensors.
        self._to_dlpack = torch.utils.dlpack.to_dlpack
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if raw is not None else (
            lambda index: torch.cuda.current_stream(index).cuda_stream)

    def export(self, x: Any) -> Tuple[Any, bool]:
        return self._to_dlpack(x), False

    def current_stream(self, x: Any) -> int:
        return self._raw_stream(x.device.index) if x.is_cuda else 0

    def _dtype(self, dtype: Any) -> Any:
        return getattr(self.torch, dtype) if isinstance(dtype, str) else dtype

    def empty(self, like: Any, shape: tuple, dtype: Any) -> Any:
        return self.torch.empty(shape, dtype=self._dtype(dtype), device=like.device)

    def full(self, like: Any, shape: tuple, dtype: Any, value: float) -> Any:
        return self.torch.full(shape, value, dtype=self._dtype(dtype), device=like.device)

    def unit_last_stride(self, x: Any) -> Any:
        return x if x.stride(-1) == 1 or x.shape[-1] == 1 else x.contiguous()

    def float32(self, x: Any) -> Any:
        return x.float()


class _CuPy(_Framework):

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy

    def current_stream(self, x: Any) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def empty(self, like: Any, shape: tuple, dtype: Any) -> Any:
        with like.device:
            return self.cupy.empty(shape, dtype=dtype)

    def full(self, like: Any, shape: tuple, dtype: Any, value: float) -> Any:
        with like.device:
            return self.cupy.full(shape, value, dtype=dtype)


class _Jax(_Framework):
    """JAX arrays are immutable: outputs are new arrays that the kernel fills through DLPack."""


    def __init__(self) -> None:
        import jax.numpy

        self.jnp = jax.numpy

    def _device(self, like: Any) -> Any:
        devices = like.devices() if callable(getattr(like, "devices", None)) else ()
        return next(iter(devices)) if len(devices) == 1 else None

    def empty(self, like: Any, shape: tuple, dtype: Any) -> Any:
        return self.jnp.zeros(shape, dtype=dtype, device=self._device(like))

    def full(self, like: Any, shape: tuple, dtype: Any, value: float) -> Any:
        return self.jnp.full(shape, value, dtype=dtype, device=self._device(like))


_BY_MODULE: dict[str, Callable[[], _Framework]] = {
    "numpy": _NumPy, "torch": _Torch, "cupy": _CuPy, "jax": _Jax, "jaxlib": _Jax}
_instances: dict[str, _Framework] = {}
_by_type: dict[type, _Framework] = {}


def framework(x: Any, name: str) -> _Framework:
    """The adapter for x's array library (cached per type), or InvalidArgumentError naming the
    argument when x is no DLPack array."""
    fw = _by_type.get(type(x))
    if fw is None:
        cls = type(x)
        if not hasattr(cls, "__dlpack__") and cls.__name__ != "PyCapsule":
            raise InvalidArgumentError(
                f"{name}: expected an array that supports DLPack (__dlpack__), got "
                f"{cls.__module__}.{cls.__name__}")
        make = _BY_MODULE.get(cls.__module__.split(".")[0], _Framework)
        fw = _instances.get(make.__name__)
        if fw is None:
            fw = _instances[make.__name__] = make()
        _by_type[cls] = fw
    return fw


def stream_handle(stream: Any) -> int:
    """A cudaStream_t as an integer, from an int, a torch.cuda.Stream or a cupy stream."""
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise InvalidArgumentError(
        "stream: expected an int (cudaStream_t) or a stream object with .cuda_stream (torch) or "
        f".ptr (cupy), got {type(stream).__module__}.{type(stream).__name__}")


def loaded(module: str) -> Any:
    """The module if the program already imported it, else None (never imports it)."""
    return sys.modules.get(module)
