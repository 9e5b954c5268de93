"""Argument checks shared by every variant: a bad array gets an error that names the problem."""

from __future__ import annotations

from typing import Any

import numpy as np

from .runtime import cuda


class ArgumentError(ValueError):
    """A kernel argument has the wrong kind, dtype, shape, layout or size."""


def is_device_array(a: Any) -> bool:
    if isinstance(a, np.ndarray) and not hasattr(a, "copy_to_host"):
        return False  # a plain host array (a mapped array is both, and counts as device)
    return hasattr(a, "copy_to_host") or hasattr(type(a), "__cuda_array_interface__")


def _contiguous(a: Any) -> bool:
    if hasattr(a, "is_c_contiguous"):
        return bool(a.is_c_contiguous())
    return bool(np.asarray(a).flags.c_contiguous)


def device_array(name: str, a: Any, dtype=np.float32, shape: tuple[int | None, ...] = (None,)) -> Any:
    """Check that `a` is a C-contiguous device array of `dtype` whose shape matches `shape`
    (its rank, and each extent that is not None). Every problem gets its own message."""
    if a is None:
        raise ArgumentError(f"{name}: missing (expected a device array)")
    if isinstance(a, np.ndarray) and not is_device_array(a):
        raise ArgumentError(f"{name}: a host NumPy array was passed where a device array is needed; "
                            f"copy it first with cuda.to_device({name})")
    if not is_device_array(a):
        raise ArgumentError(f"{name}: expected a device array, got {type(a).__name__}")
    if np.dtype(a.dtype) != np.dtype(dtype):
        raise ArgumentError(f"{name}: dtype {np.dtype(a.dtype)} where {np.dtype(dtype)} is required")
    if len(a.shape) != len(shape):
        want = "1-D" if len(shape) == 1 else f"{len(shape)}-D"
        raise ArgumentError(f"{name}: shape {tuple(a.shape)} is not {want}")
    if not _contiguous(a):
        raise ArgumentError(f"{name}: not contiguous (a strided view); pass a contiguous copy")
    for axis, (got, want) in enumerate(zip(a.shape, shape)):
        if want is not None and got != want:
            what = f"length {got} does not match n = {want}" if len(shape) == 1 else \
                f"shape {tuple(a.shape)} where {tuple('*' if s is None else s for s in shape)} is required (axis {axis})"
            raise ArgumentError(f"{name}: {what}")
    return a


def device_vector(name: str, a: Any, dtype=np.float32, n: int | None = None) -> Any:
    """Check that `a` is a 1-D C-contiguous device array of `dtype` (and length n, if given)."""
    return device_array(name, a, dtype, (n,))


def same_length(**arrays: Any) -> int:
    """The common length of 1-D arrays, or an error listing every length."""
    lengths = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise ArgumentError(f"mismatched lengths: {listed}")
    return next(iter(lengths.values()))


def to_device(host: dict[str, Any]) -> dict[str, Any]:
    """Copy the array values of a dict to the device; scalars pass through."""
    return {k: cuda.to_device(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
            for k, v in host.items()}


_NAN_PAYLOAD_BITS = {2: 0x7E5A, 4: 0x7FC0DEAD, 8: 0x7FF8DEADDEADDEAD}  # quiet NaNs no arithmetic produces


def poison_value(dtype: Any) -> Any:
    """What every output element holds before a run: for floats a NaN with a payload (a kernel's own NaN,
    inf / inf say, has none, so the two are told apart bit for bit), for integers the type's minimum."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.array(_NAN_PAYLOAD_BITS[dtype.itemsize], dtype=f"u{dtype.itemsize}").view(dtype)[()]
    return np.iinfo(dtype).min


def unwritten(a: np.ndarray) -> np.ndarray:
    """The elements of a host copy of an output that still hold the poison (never written)."""
    a = np.asarray(a)
    poison = np.array(poison_value(a.dtype), dtype=a.dtype)
    if a.dtype.kind == "f":
        bits = f"u{a.dtype.itemsize}"
        return a.view(bits) == poison.view(bits)
    return a == poison


def poisoned(specs: dict[str, tuple[tuple[int, ...], Any]]) -> dict[str, Any]:
    """Output buffers filled with the poison (see poison_value), so an unwritten element shows."""
    return {name: cuda.to_device(np.full(shape, poison_value(dtype), dtype=np.dtype(dtype)))
            for name, (shape, dtype) in specs.items()}
