"""Loading ``.npy`` payloads without running code from them.

Some sources (Gen-DGRL) save each episode as a ``.npy`` file holding a pickled dict of
arrays.  Unpickling may call any importable function, so these files are read with an
unpickler that rebuilds numpy arrays, dtypes and plain containers and refuses every
other global: a file that asks for anything else is rejected, not executed.
"""

from __future__ import annotations

import io
import pickle
from typing import IO, Any

import numpy as np

__all__ = ["load_npy", "load_pickle"]

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"),
    ("collections", "OrderedDict"),
}


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refused to load {module}.{name}: a data file may only hold numpy arrays and "
            "plain containers"
        )


def load_npy(stream: IO[bytes], name: str) -> Any:
    """Read one ``.npy`` payload: an array, or the object a pickled object array holds.

    Raises:
        ValueError: if the payload is not a ``.npy`` file or asks for code to run.

    Examples:
        >>> buffer = io.BytesIO()
        >>> np.save(buffer, np.array({"x": np.arange(3)}, dtype=object), allow_pickle=True)
        >>> _ = buffer.seek(0)
        >>> load_npy(buffer, "episode.npy")["x"].tolist()
        [0, 1, 2]
        >>> class Evil:
        ...     def __reduce__(self):
        ...         return (print, ("pwned",))
        >>> buffer = io.BytesIO()
        >>> np.save(buffer, np.array([Evil()], dtype=object), allow_pickle=True)
        >>> _ = buffer.seek(0)
        >>> load_npy(buffer, "evil.npy")
        Traceback (most recent call last):
        ...
        ValueError: evil.npy is not a plain .npy payload (refused to load builtins.print: a data file may only hold numpy arrays and plain containers). It is rejected, never executed.
    """
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
        if not dtype.hasobject:
            count = int(np.prod(shape))
            data = stream.read(count * dtype.itemsize)
            flat = np.frombuffer(data, dtype=dtype, count=count)
            return flat.reshape(shape, order="F" if fortran_order else "C").copy()
        value = _ArraysOnly(
            io.BufferedReader(stream) if not hasattr(stream, "peek") else stream
        ).load()
    except (pickle.UnpicklingError, ValueError, EOFError, AttributeError) as err:
        raise ValueError(
            f"{name} is not a plain .npy payload ({err}). It is rejected, never executed."
        ) from err
    if isinstance(value, np.ndarray) and value.dtype.hasobject and value.shape == ():
        return value.item()
    return value


def load_pickle(data: bytes, name: str) -> Any:
    """Unpickle ``data`` allowing only numpy arrays and plain containers.

    Raises:
        ValueError: if the payload asks for anything else (it is not executed).
    """
    try:
        return _ArraysOnly(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as err:
        raise ValueError(
            f"{name} is not a plain pickled record ({err}). It is rejected, never executed."
        ) from err
