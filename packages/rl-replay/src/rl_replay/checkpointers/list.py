"""The checkpointer of :class:`~rl_replay.ListStorage`: :class:`ListStorageCheckpointer`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, is_tensor_collection

from rl_replay.checkpointers._files import load_memmap_dir, read_json, write_json
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = ["ListStorageCheckpointer"]

META_FILE = "storage_metadata.json"
DATA_DIR = "tensors"
_TENSOR = "__tensor__"
_TENSORDICT = "__tensordict__"


class ListStorageCheckpointer(StorageCheckpointerBase):
    """A storage checkpointer for ListStoage.

    JSON-able items are written to ``storage_metadata.json``; tensors and
    tensordicts go to memory-mapped files under ``tensors/``.  Items that can
    only be saved with pickle are refused.

    Raises:
        TypeError: on :meth:`dumps`, for an item that is neither JSON-able nor a tensor/tensordict.

    Examples:
        >>> import tempfile, torch
        >>> from rl_replay import ListStorage
        >>> storage = ListStorage(10)
        >>> storage.set(torch.arange(3), ["a", {"b": 1}, torch.ones(2)])
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = ListStorage(10)
        >>> restored.loads(path)
        >>> restored[0], restored[1], restored[2].tolist()
        ('a', {'b': 1}, [1.0, 1.0])
    """

    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a ListStorage
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, Any] = {}
        items = [_encode(item, position, tensors) for position, item in enumerate(storage._storage)]
        if tensors:
            TensorDict(tensors, batch_size=[]).memmap(path / DATA_DIR, num_threads=0)
        write_json(path / META_FILE, {"type": type(storage).__name__, "items": items})

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a ListStorage
        """Restore ``storage`` from ``path``.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is truncated or malformed.
        """
        path = Path(path)
        owner = type(storage).__name__
        meta = read_json(path / META_FILE, owner)
        if not isinstance(meta, dict) or "items" not in meta:
            raise ValueError(
                f"{owner}.loads expected an 'items' entry in {path / META_FILE}; the file is not a "
                "ListStorage checkpoint."
            )
        needs_tensors = any(isinstance(i, dict) and len(i) == 1 and _ref(i) for i in meta["items"])
        tensors = load_memmap_dir(path / DATA_DIR, owner) if needs_tensors else None
        storage._storage = [_decode(item, tensors) for item in meta["items"]]


def _encode(item: Any, position: int, tensors: dict[str, Any]) -> Any:  # Any: a stored item
    name = f"item_{position}"
    if isinstance(item, torch.Tensor):
        tensors[name] = item
        return {_TENSOR: name}
    if is_tensor_collection(item):
        tensors[name] = item
        return {_TENSORDICT: name}
    try:
        json.dumps(item)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"ListStorageCheckpointer can save JSON-able objects, tensors and tensordicts; item "
            f"{position} is a {type(item).__name__}, which would need pickle. Convert it, or use "
            "state_dict() with torch.save."
        ) from err
    return item


def _ref(item: dict[str, Any]) -> str | None:
    return item.get(_TENSOR) or item.get(_TENSORDICT)


def _decode(item: Any, tensors: Any) -> Any:  # Any: a stored item
    if isinstance(item, dict) and len(item) == 1 and _ref(item):
        return tensors.get(_ref(item)).clone()
    return item
