"""Fast pickling of messages that carry tensors (the pickled-transfer fallback).

CPU tensors are pickled as numpy arrays: only the viewed elements are written
(the default pickling of a tensor writes its whole storage, so a row of a batch
would carry the batch) and unpickling skips ``torch.load``'s machinery.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from typing import Any

import torch

_NUMPY_DTYPES = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
    }
)


def _reduce_tensor(tensor: torch.Tensor) -> tuple:
    if tensor.device.type == "cpu" and tensor.dtype in _NUMPY_DTYPES and not tensor.requires_grad:
        return torch.from_numpy, (tensor.detach().numpy(),)
    return tensor.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


_TABLE = copyreg.dispatch_table.copy()
_TABLE[torch.Tensor] = _reduce_tensor


def dumps(obj: Any) -> bytes:  # Any: any picklable message
    """Pickle ``obj``, with CPU tensors as numpy arrays.

    Examples:
        >>> import pickle
        >>> x = torch.arange(6).reshape(3, 2)
        >>> pickle.loads(dumps(x[1]))
        tensor([2, 3])
        >>> len(dumps(torch.zeros(1000)[:2])) < 1000
        True
    """
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _TABLE
    pickler.dump(obj)
    return buf.getvalue()
