"""The checkpointer of :class:`~rl_replay.ListStorage`: :class:`ListStorageCheckpointer`.

Items are encoded so that they come back exactly: ``None``, ``bool``, ``int``,
``float`` and ``str`` are written as JSON values; every container is a JSON
object with a single tag (``{"list": [...]}``, ``{"tuple": [...]}``,
``{"dict": [[key, value], ...]}``), so keys keep their types, tuples stay tuples
and no stored dict can be mistaken for a reference; tensors (``{"tensor": ...}``)
and tensordicts (``{"tensordict": ...}``) point to checksummed tensor files.
Anything else would need pickle and is refused by :meth:`dumps`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from rl_replay.checkpointers._files import (
    read_json,
    read_tensordict,
    refuse_pickles,
    write_json,
    write_tensordict,
)
from rl_replay.checkpointers.base import StorageCheckpointerBase

__all__ = ["ListStorageCheckpointer"]

META_FILE = "storage_metadata.json"
DATA_DIR = "tensors"
FORMAT = "tagged-json-1"
_SCALARS = (type(None), bool, int, float, str)


class ListStorageCheckpointer(StorageCheckpointerBase):
    """A storage checkpointer for ListStoage.

    Items made of ``None``, bools, ints, floats, strings, lists, tuples, dicts,
    tensors and tensordicts round-trip exactly: tuples stay tuples, dict keys
    keep their types.  Items are written to ``storage_metadata.json``; tensors
    and tensordicts go to checksummed tensor files under ``tensors/``.  Other
    objects could only be saved with pickle and are refused.

    Raises:
        TypeError: on :meth:`dumps`, for an item (or part of one) of another type.
        FileNotFoundError: on :meth:`loads`, if a file is missing.
        ValueError: on :meth:`loads`, if a file is corrupt or holds more items
            than the storage's capacity.

    Examples:
        >>> import tempfile, torch
        >>> from rl_replay import ListStorage
        >>> storage = ListStorage(10)
        >>> storage.set(torch.arange(3), ["a", {1: ("b", 2.5)}, torch.ones(2)])
        >>> path = tempfile.mkdtemp()
        >>> storage.dumps(path)
        >>> restored = ListStorage(10)
        >>> restored.loads(path)
        >>> restored[0], restored[1], restored[2].tolist()
        ('a', {1: ('b', 2.5)}, [1.0, 1.0])
    """

    def dumps(self, storage: Any, path: str | Path) -> None:  # Any: a ListStorage
        path = Path(path)
        owner = type(storage).__name__
        tensors: dict[str, torch.Tensor] = {}
        items = [
            _encode(item, tensors, f"item {position}", owner)
            for position, item in enumerate(storage._storage)
        ]
        path.mkdir(parents=True, exist_ok=True)
        if tensors:
            write_tensordict(path / DATA_DIR, tensors, owner)
        write_json(path / META_FILE, {"type": owner, "format": FORMAT, "items": items})

    def loads(self, storage: Any, path: str | Path) -> None:  # Any: a ListStorage
        """Restore ``storage`` from ``path``; on error the storage is unchanged.

        Raises:
            FileNotFoundError: if a file is missing.
            ValueError: if a file is corrupt or malformed.
        """
        self._stage(storage, Path(path))()

    def _stage(self, storage: Any, path: Path) -> Callable[[], None]:  # Any: a ListStorage
        owner = type(storage).__name__
        refuse_pickles(path, owner)
        meta_file = path / META_FILE
        meta = read_json(meta_file, owner)
        items = meta.get("items")
        if meta.get("format") != FORMAT or not isinstance(items, list):
            raise ValueError(
                f"{owner}.loads expected a list of items in the format {FORMAT!r} in {meta_file}, "
                f"found format {meta.get('format')!r}; the file is not a ListStorage checkpoint "
                "of this version. Dump it again."
            )
        if len(items) > storage.max_size:
            raise ValueError(
                f"{owner}.loads found {len(items)} items in {meta_file}, more than the capacity "
                f"{storage.max_size}. Load it into a ListStorage of at least that size."
            )
        data_dir = path / DATA_DIR
        tensors = read_tensordict(data_dir, owner) if data_dir.exists() else None
        decoder = _Decoder(tensors, meta_file, owner)
        restored = [decoder.decode(item) for item in items]

        def apply() -> None:
            storage._storage = restored

        return apply


def _refuse(item: Any, where: str, owner: str) -> TypeError:
    return TypeError(
        f"{owner}.dumps saves None, bools, ints, floats, strings, lists, tuples, dicts, "
        f"tensors and tensordicts; {where} is a {type(item).__name__}, which would need pickle "
        "or would not come back as the same type. Convert it to one of those types."
    )


def _encode(item: Any, tensors: dict[str, torch.Tensor], where: str, owner: str) -> Any:
    kind = type(item)
    if kind in _SCALARS:
        return item
    if kind is list or kind is tuple:
        values = [_encode(v, tensors, f"{where}[{i}]", owner) for i, v in enumerate(item)]
        return {kind.__name__: values}
    if kind is dict:
        return {
            "dict": [
                [
                    _encode(k, tensors, f"a key of {where}", owner),
                    _encode(v, tensors, f"{where}[{k!r}]", owner),
                ]
                for k, v in item.items()
            ]
        }
    if kind is torch.Tensor:
        return {"tensor": _add_tensor(item, tensors, where, owner)}
    if kind is TensorDict:
        nodes = [
            [list(key) if isinstance(key, tuple) else [key], list(item.get(key).batch_size)]
            for key in item.keys(True, False)
            if isinstance(item.get(key), TensorDict)
        ]
        leaves = []
        for key in item.keys(True, False):
            value = item.get(key)
            if isinstance(value, TensorDict):
                continue
            if type(value) is not torch.Tensor:
                raise _refuse(value, f"the entry {key!r} of {where}", owner)
            leaves.append(
                [
                    list(key) if isinstance(key, tuple) else [key],
                    _add_tensor(value, tensors, where, owner),
                ]
            )
        device = None if item.device is None else str(item.device)
        return {
            "tensordict": {
                "batch_size": list(item.batch_size),
                "device": device,
                "nodes": nodes,
                "leaves": leaves,
            }
        }
    raise _refuse(item, where, owner)


def _add_tensor(
    tensor: torch.Tensor, tensors: dict[str, torch.Tensor], where: str, owner: str
) -> dict[str, Any]:
    if tensor.layout is not torch.strided and not tensor.is_nested:
        raise TypeError(
            f"{owner}.dumps saves strided and nested tensors; {where} holds a {tensor.layout} "
            "tensor. Convert it with .to_dense()."
        )
    name = f"t{len(tensors)}"
    tensors[name] = tensor.detach()
    return {"name": name, "device": str(tensor.device), "requires_grad": tensor.requires_grad}


class _Decoder:
    """Rebuild items from their tagged JSON form, refusing anything malformed."""

    def __init__(self, tensors: TensorDict | None, meta_file: Path, owner: str) -> None:
        self.tensors = tensors
        self.meta_file = meta_file
        self.owner = owner

    def fail(self, found: Any, expected: str) -> ValueError:
        text = repr(found)
        return ValueError(
            f"{self.owner}.loads expected {expected} in {self.meta_file}, found "
            f"{text[:80]}{'...' if len(text) > 80 else ''}. The checkpoint is corrupt; dump it again."
        )

    def decode(self, item: Any) -> Any:
        if type(item) in _SCALARS:
            return item
        if not isinstance(item, dict) or len(item) != 1:
            raise self.fail(item, "a JSON value or a one-entry tagged object")
        ((tag, value),) = item.items()
        if tag in ("list", "tuple") and isinstance(value, list):
            values = [self.decode(v) for v in value]
            return values if tag == "list" else tuple(values)
        if tag == "dict" and isinstance(value, list):
            out = {}
            for pair in value:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise self.fail(pair, "a [key, value] pair")
                key = self.decode(pair[0])
                try:
                    out[key] = self.decode(pair[1])
                except TypeError as err:
                    raise self.fail(pair[0], "a hashable dict key") from err
            return out
        if tag == "tensor":
            return self.tensor(value)
        if tag == "tensordict" and isinstance(value, dict):
            return self.tensordict(value)
        raise self.fail(item, "one of the tags list, tuple, dict, tensor, tensordict")

    def tensor(self, ref: Any) -> torch.Tensor:
        if not isinstance(ref, dict) or set(ref) != {"name", "device", "requires_grad"}:
            raise self.fail(ref, "a tensor reference")
        name = ref["name"]
        if self.tensors is None:
            raise FileNotFoundError(
                f"{self.owner}.loads expected the tensors directory {self.meta_file.parent / DATA_DIR} "
                f"that {self.meta_file} refers to, which does not exist. The checkpoint is "
                "incomplete; dump it again."
            )
        if not isinstance(name, str) or name not in self.tensors.keys():
            raise self.fail(name, f"the name of a tensor of {self.meta_file.parent / DATA_DIR}")
        try:
            device = torch.device(ref["device"])
        except (RuntimeError, TypeError) as err:
            raise self.fail(ref["device"], "a device") from err
        tensor = self.tensors.get(name).to(device)
        if ref["requires_grad"] is True:
            tensor.requires_grad_(True)
        return tensor

    def tensordict(self, value: dict[str, Any]) -> TensorDict:
        if set(value) != {"batch_size", "device", "nodes", "leaves"}:
            raise self.fail(value, "a tensordict description")
        try:
            out = TensorDict(batch_size=value["batch_size"], device=value["device"])
            for key, batch_size in value["nodes"]:
                out.set(tuple(key), TensorDict(batch_size=batch_size, device=value["device"]))
            for key, ref in value["leaves"]:
                out.set(tuple(key), self.tensor(ref))
        except (RuntimeError, TypeError, ValueError, KeyError) as err:
            raise self.fail(
                value, f"a tensordict whose entries fit its batch size ({err})"
            ) from err
        return out
