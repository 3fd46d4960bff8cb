"""Exceptions for the library's status codes. Each carries the library's message, which names
the argument and the value that failed (SPEC.md "Errors")."""

from __future__ import annotations


class GdnError(Exception):
    """Base of every error gdn raises. `status` is the C API status name (e.g.
    "invalid_argument"); str(error) is the library's message."""

    status = "error"


class InvalidArgumentError(GdnError, ValueError):
    """A bad pointer, size, dtype, index or combination (GDN_STATUS_INVALID_ARGUMENT)."""

    status = "invalid_argument"


class WorkspaceTooSmallError(GdnError, ValueError):
    """The workspace is smaller than the call needs (GDN_STATUS_WORKSPACE_TOO_SMALL)."""

    status = "workspace_too_small"


class UnsupportedError(GdnError, NotImplementedError):
    """Valid per SPEC.md, but no kernel exists for it (GDN_STATUS_UNSUPPORTED)."""

    status = "unsupported"


class BackendUnavailableError(GdnError, RuntimeError):
    """The backend is not compiled in, or there is no device (GDN_STATUS_BACKEND_UNAVAILABLE)."""

    status = "backend_unavailable"


class DeviceError(GdnError, RuntimeError):
    """The CUDA runtime reported an error (GDN_STATUS_DEVICE_ERROR)."""

    status = "device_error"


class InternalError(GdnError, RuntimeError):
    """A bug in gdn (GDN_STATUS_INTERNAL_ERROR)."""

    status = "internal_error"


_BY_NAME = {cls.status: cls for cls in (
    InvalidArgumentError, WorkspaceTooSmallError, UnsupportedError, BackendUnavailableError,
    DeviceError, InternalError)}


def error_for(status: int, message: str) -> GdnError:
    """The exception for a C API status code, carrying the library's message."""
    from ._gdn import STATUS, status_string

    for name, value in STATUS.items():
        if value == status:
            return _BY_NAME[name](message or status_string(status))
    return InternalError(f"unknown status {status}: {message}")
