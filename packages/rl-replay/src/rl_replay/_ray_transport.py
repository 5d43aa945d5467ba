"""How a :class:`~rl_replay.RayReplayBuffer`'s data crosses the process boundary.

:func:`pack` turns tensors and tensordicts into numpy arrays (Ray's object store
moves them without pickling their bytes), a tensordict's leaves as one byte buffer
with a table of where each leaf lies; :func:`unpack` undoes it. A buffer over
``CHUNK`` bytes travels as views of chunks of it: Ray copies a buffer over about a
megabyte with a pool of threads, which costs several times a plain copy on a busy
machine, and the receiver makes its one copy out of the read-only object store
anyway. :func:`join` turns several packed batches (a client's staged writes) into
as few as possible: batches of one layout become one contiguous batch, written by
the shard with one local ``extend``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

__all__ = [
    "CHUNK",
    "INLINE",
    "as_args",
    "count",
    "from_args",
    "join",
    "pack",
    "rows_batches",
    "rows_head",
    "snapshot",
    "split_index",
    "unpack",
]

CHUNK = 512 * 1024  # bytes of one buffer handed to Ray's object store
INLINE = 90_000  # bytes of one call argument Ray sends within the call (its limit: 100 kB)
INLINE_TOTAL = 1 << 20  # bytes of data sent as inline arguments at most


def _to_numpy(tensor: torch.Tensor) -> Any:  # Any: an ndarray or the tensor itself
    if tensor.device.type != "cpu" or tensor.dtype in (torch.bfloat16,) or tensor.is_sparse:
        return tensor
    return tensor.detach().numpy()


def _to_tensor(value: Any, copy: bool) -> Any:  # Any: what _to_numpy returned
    if isinstance(value, np.ndarray):
        if copy or not value.flags.writeable:
            value = value.copy()
        return torch.from_numpy(value)
    return value


def pack(data: Any) -> Any:  # Any: any buffer element or batch
    """Tensors and tensordicts as numpy arrays (moved by Ray's object store without pickling).

    A tensordict's leaves travel as one byte buffer (one object-store buffer rather than
    one per leaf) with a table of where each leaf lies in it.
    """
    if isinstance(data, TensorDictBase):
        arrays, table, extra, offset = [], [], {}, 0
        for key, value in data.items(True, True):
            leaf = _to_numpy(value) if isinstance(value, torch.Tensor) else value
            if not isinstance(leaf, np.ndarray):
                extra[key] = leaf
                continue
            flat = np.ascontiguousarray(leaf).reshape(-1).view(np.uint8)
            pad = -offset % _ALIGN
            if pad:
                arrays.append(np.zeros(pad, dtype=np.uint8))
                offset += pad
            table.append((key, leaf.dtype.str, leaf.shape, offset, flat.size))
            arrays.append(flat)
            offset += flat.size
        blob = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.uint8)
        return ("__td__", tuple(data.batch_size), _chunked(blob), table, extra)
    if isinstance(data, torch.Tensor):
        return ("__tensor__", _to_numpy(data))
    return data


_ALIGN = 16  # bytes: every leaf starts aligned for any dtype


def _chunked(blob: np.ndarray) -> Any:  # Any: the array, or a list of views of it
    if blob.size <= CHUNK:
        return blob
    return [blob[start : start + CHUNK] for start in range(0, blob.size, CHUNK)]


def _whole(blob: Any, copy: bool) -> np.ndarray:
    """One writable array of a packed blob (one copy unless it is already the caller's)."""
    if isinstance(blob, list):
        return np.concatenate(blob) if blob else np.zeros(0, dtype=np.uint8)
    return blob.copy() if copy or not blob.flags.writeable else blob


def unpack(data: Any, *, copy: bool = False) -> Any:  # Any: what pack returned
    """Undo :func:`pack`; ``copy`` detaches the result from the object store's memory."""
    if isinstance(data, tuple) and data and data[0] == "__td__":
        _, batch_size, blob, table, extra = data
        blob = _whole(blob, copy)  # at most one copy of the whole buffer
        td = TensorDict(batch_size=batch_size)
        for key, dtype, shape, offset, nbytes in table:
            leaf = blob[offset : offset + nbytes].view(np.dtype(dtype)).reshape(shape)
            td.set(key, torch.from_numpy(leaf))
        for key, value in extra.items():
            td.set(key, _to_tensor(value, copy))
        return td
    if isinstance(data, tuple) and len(data) == 2 and data[0] == "__tensor__":
        return _to_tensor(data[1], copy)
    return data


def as_args(packed: Any) -> tuple[Any, list[np.ndarray]]:
    """``(head, chunks)``: a packed tensordict's buffer cut into arguments Ray sends inline.

    Ray sends a call argument under 100 kB inside the call itself; a bigger one goes
    through the object store, at about a millisecond more. A tensordict up to
    ``INLINE_TOTAL`` bytes travels as several small arguments (views, no copy);
    :func:`from_args` puts them back together. Anything else: ``(packed, [])``.
    """
    if not (isinstance(packed, tuple) and packed and packed[0] == "__td__"):
        return packed, []
    blobs = packed[2] if isinstance(packed[2], list) else [packed[2]]
    if sum(blob.size for blob in blobs) > INLINE_TOTAL:
        return packed, []
    chunks = [blob[i : i + INLINE] for blob in blobs for i in range(0, blob.size, INLINE)]
    return ("__td__", packed[1], None, packed[3], packed[4]), chunks


def from_args(head: Any, chunks: tuple[np.ndarray, ...] | list[np.ndarray]) -> Any:
    """Undo :func:`as_args`."""
    if head[0] != "__td__" or head[2] is not None:
        return head
    return ("__td__", head[1], list(chunks), head[3], head[4])


def rows_head(
    packed: Any, sizes: list[int], info: dict[str, Any] | None
) -> tuple[Any, list[np.ndarray]]:  # Any: a description, or None
    """``(head, chunks)``: one packed batch of ``sum(sizes)`` items, to be split in ``sizes``.

    The packed buffer is cut into ``len(sizes)`` byte chunks (views, no copy) that
    travel as separate small return values; :func:`rows_batches` joins them with one
    copy and splits the batches as views of it. ``(None, [])`` if the batch is not
    one numpy buffer (non-numpy leaves): send one packed batch per size then.
    """
    if isinstance(packed, tuple) and packed and packed[0] == "__td__":
        _, batch_size, blob, table, extra = packed
        if extra or not batch_size:
            return None, []
        layout = ("td", batch_size, table)
    elif isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "__tensor__":
        array = packed[1]
        if not isinstance(array, np.ndarray) or not array.ndim:
            return None, []
        layout = ("tensor", array.dtype.str, array.shape)
        blob = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    else:
        return None, []
    if isinstance(blob, list):
        blob = np.concatenate(blob) if blob else np.zeros(0, dtype=np.uint8)
    step = max(1, -(-blob.size // len(sizes)))
    chunks = [blob[i * step : (i + 1) * step] for i in range(len(sizes))]
    return ("__rows__", list(sizes), layout, info), chunks


def rows_batches(head: Any, chunks: Any) -> list[tuple[Any, Any]]:  # Any: rows_head's
    """Undo :func:`rows_head`: ``[(batch, info)]``, one per size, views of one writable copy."""
    _, sizes, layout, info = head
    chunks = list(chunks)
    if len(chunks) == 1:
        whole = chunks[0] if chunks[0].flags.writeable else chunks[0].copy()
    else:
        whole = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint8)
    if layout[0] == "td":
        _, batch_size, table = layout
        data = unpack(("__td__", batch_size, whole, table, {}))
    else:
        _, dtype, shape = layout
        data = torch.from_numpy(whole.view(np.dtype(dtype)).reshape(shape))
    datas = data.split(sizes)
    if info is None:
        return [(part, None) for part in datas]
    total = sum(sizes)
    columns = {}
    for key, value in info.items():
        value = unpack(value)
        if isinstance(value, torch.Tensor) and value.ndim and value.shape[0] == total:
            columns[key] = value.split(sizes)
        else:
            columns[key] = [value] * len(sizes)
    return [
        (part, {key: column[b] for key, column in columns.items()}) for b, part in enumerate(datas)
    ]


def snapshot(packed: Any) -> Any:  # Any: what pack returned
    """A copy of a packed batch that later changes to the caller's data cannot reach."""
    if isinstance(packed, tuple) and packed and packed[0] == "__td__":
        _, batch_size, blob, table, extra = packed  # pack made blob a fresh copy
        return ("__td__", batch_size, blob, table, copy.deepcopy(extra))
    if isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "__tensor__":
        value = packed[1]
        return ("__tensor__", value.copy() if isinstance(value, np.ndarray) else value.clone())
    return copy.deepcopy(packed)


def count(packed: Any) -> int:
    """The number of items along the first dim of a packed batch (1 if it has none)."""
    if isinstance(packed, tuple) and packed and packed[0] == "__td__":
        return int(packed[1][0]) if packed[1] else 1
    if isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "__tensor__":
        shape = getattr(packed[1], "shape", ())
        return int(shape[0]) if len(shape) else 1
    return len(packed) if isinstance(packed, list) else 1


def _layout(packed: Any) -> Any:  # Any: a hashable description, or None (not joinable)
    if isinstance(packed, tuple) and packed and packed[0] == "__td__":
        _, batch_size, _, table, extra = packed
        if extra or not batch_size:
            return None
        leaves = tuple((key, dtype, tuple(shape[1:])) for key, dtype, shape, _, _ in table)
        return ("td", tuple(batch_size[1:]), leaves)
    if isinstance(packed, tuple) and len(packed) == 2 and packed[0] == "__tensor__":
        value = packed[1]
        if isinstance(value, np.ndarray) and value.ndim:
            return ("tensor", value.dtype.str, value.shape[1:])
    return None


def _join_group(group: list[Any]) -> Any:
    first = group[0]
    if first[0] == "__tensor__":
        return ("__tensor__", np.concatenate([item[1] for item in group]))
    total = sum(item[1][0] for item in group)
    blobs = [np.concatenate(item[2]) if isinstance(item[2], list) else item[2] for item in group]
    arrays, table, offset = [], [], 0
    for leaf, (key, dtype, shape, _, _) in enumerate(first[3]):
        pad = -offset % _ALIGN
        if pad:
            arrays.append(np.zeros(pad, dtype=np.uint8))
            offset += pad
        nbytes = 0
        for item, blob in zip(group, blobs, strict=True):
            _, _, _, start, size = item[3][leaf]
            arrays.append(blob[start : start + size])
            nbytes += size
        table.append((key, dtype, (total, *shape[1:]), offset, nbytes))
        offset += nbytes
    blob = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.uint8)
    return ("__td__", (total, *first[1][1:]), blob, table, {})


def join(items: list[Any]) -> tuple[list[Any], list[list[int]]]:
    """Packed batches -> (fewer packed batches, the part lengths of each).

    Consecutive batches of one layout (same keys, dtypes and trailing shapes) are
    joined along the first dim into one contiguous buffer.

    Examples:
        >>> joined, sizes = join([pack(torch.arange(3)), pack(torch.arange(2)), pack([1])])
        >>> len(joined), sizes
        (2, [[3, 2], [1]])
        >>> unpack(joined[0]).tolist()
        [0, 1, 2, 0, 1]
    """
    out, sizes = [], []
    group: list[Any] = []
    layout = None
    for item in [*items, None]:
        this = None if item is None else _layout(item)
        if group and (this is None or this != layout):
            out.append(group[0] if len(group) == 1 else _join_group(group))
            sizes.append([count(part) for part in group])
            group = []
        if item is None:
            break
        if this is None:
            out.append(item)
            sizes.append([count(item)])
        else:
            group.append(item)
            layout = this
    return out, sizes


def split_index(index: Any, sizes: list[int]) -> list[Any]:
    """The positions written by each part of a joined write."""
    if len(sizes) == 1:
        return [index]
    if isinstance(index, torch.Tensor) and index.ndim == 1 and index.numel() == sum(sizes):
        return list(index.split(sizes))
    return [index] * len(sizes)  # a writer that skipped items: every part gets them all
