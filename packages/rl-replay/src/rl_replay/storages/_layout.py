"""Leaf layout of a tensor storage: pytree <-> TensorDict conversion and write validation.

A :class:`_Layout` is built once, from the first write, and cached by the
storage: it knows the flat leaf keys, the per-leaf trailing shape and dtype,
and (for pytrees and plain tensors) the tree spec used to rebuild the user's
structure on read.  Writes are matched against it leaf by leaf *before* any
copy happens, so a bad write never leaves the storage half-written.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection

from rl_replay import _td

__all__ = ["_Layout", "_leaves_of", "_nest"]


def _leaves_of(data: Any) -> tuple[list[tuple[Any, torch.Tensor]], Any]:
    """Return ``([(key, tensor), ...], tree_spec)`` for a tensordict, tensor or pytree.

    ``tree_spec`` is ``None`` for tensor collections; pytree leaves get the keys
    ``"0"``, ``"1"``, ... in flattening order.

    Raises:
        TypeError: if a pytree leaf is not a tensor.
    """
    if is_tensor_collection(data):
        leaves: list[tuple[Any, torch.Tensor]] = []
        _walk(data, (), leaves)
        return leaves, None
    leaves, spec = _td.tree_flatten(data)
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(
                "Tensor storages expected a tensor, a tensordict or a pytree of tensors, "
                f"found a leaf of type {type(leaf).__name__}. Use ListStorage for arbitrary "
                "python objects."
            )
    return [(str(i), leaf) for i, leaf in enumerate(leaves)], spec


def _walk(
    data: TensorDictBase, prefix: tuple[str, ...], out: list[tuple[Any, torch.Tensor]]
) -> None:
    """Collect ``(key, leaf)`` pairs; keys are ``str`` at the root and tuples below it."""
    for key, value in data.items():
        if isinstance(value, torch.Tensor):
            out.append(((*prefix, key) if prefix else key, value))
        elif is_tensor_collection(value):
            _walk(value, (*prefix, key), out)
        else:
            out.append(((*prefix, key) if prefix else key, value))


def _nest(flat: dict[Any, torch.Tensor]) -> dict[str, Any]:
    """Turn ``{("a", "b"): t, "c": u}`` into ``{"a": {"b": t}, "c": u}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if isinstance(key, tuple):
            node = out
            for part in key[:-1]:
                node = node.setdefault(part, {})
            node[key[-1]] = value
        else:
            out[key] = value
    return out


class _Layout:
    """The cached leaf structure of an initialised tensor storage."""

    def __init__(self, storage_td: TensorDictBase, tree_spec: Any, ndim: int) -> None:
        self.tree_spec = tree_spec
        self.ndim = ndim
        self.shape = storage_td.batch_size
        self.inner = tuple(self.shape[1:])
        self.per_row = self.shape[1:].numel()
        self.keys = [key for key, _ in storage_td.items(True, True)]
        # plain-tensor views: indexing a MemoryMappedTensor subclass is slower
        self.tensors = [_plain(storage_td.get(key)) for key in self.keys]
        self.by_key = dict(zip(self.keys, self.tensors, strict=True))
        self.tails = {key: t.shape[ndim:] for key, t in self.by_key.items()}
        self.nested = any(isinstance(key, tuple) for key in self.keys)
        self._pairs = list(self.by_key.items())
        self._flat_td = tree_spec is None and not self.nested

    def gather(self, index: torch.Tensor) -> Any:
        """Rows ``index`` (a 1-d ``LongTensor``) of every leaf, rebuilt; no re-validation."""
        flat = {key: tensor.index_select(0, index) for key, tensor in self._pairs}
        batch_size = torch.Size((index.shape[0], *self.inner))
        if self._flat_td:  # gathered leaves of validated storage tensors: nothing to check
            return _td.new_unchecked(flat, batch_size=batch_size)
        return self.build(flat, batch_size)

    def match(self, data: Any, lead: torch.Size) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Pair each storage tensor with the incoming leaf; raise on any mismatch.

        Args:
            data: the incoming tensordict / tensor / pytree.
            lead: the leading shape every incoming leaf must have.

        Raises:
            KeyError: if the keys differ from the stored ones.
            ValueError: if a leaf shape differs, or the structure of a pytree differs.
        """
        leaves, spec = _leaves_of(data)
        if (spec is None) != (self.tree_spec is None) or (
            spec is not None and spec != self.tree_spec
        ):
            raise ValueError(
                f"Storage expected data with the structure {self._describe()}, found "
                f"{_describe(spec)}. Write data with the same structure as the first write."
            )
        if len(leaves) != len(self.keys):
            found = sorted(str(k) for k, _ in leaves)
            raise KeyError(
                f"Storage expected the keys {sorted(str(k) for k in self.keys)}, found {found}. "
                "Every write must carry exactly the keys of the first write."
            )
        pairs = []
        for key, value in leaves:
            dest = self.by_key.get(key)
            if dest is None:
                raise KeyError(
                    f"Storage has no entry {key!r}; stored keys are "
                    f"{sorted(str(k) for k in self.keys)}. Write data with the stored keys."
                )
            tail = self.tails[key]
            if value.shape != lead + tail:
                raise ValueError(
                    f"Storage expected entry {key!r} of shape {tuple(lead + tail)} "
                    f"(leading {tuple(lead)} + stored {tuple(tail)}), found {tuple(value.shape)}. "
                    "Check the batch size of the data and the storage ndim."
                )
            pairs.append((dest, value))
        return pairs

    def build(self, flat: dict[Any, torch.Tensor], batch_size: torch.Size) -> Any:
        """Rebuild the user-facing object from gathered leaves (no re-validation)."""
        if self.tree_spec is None:
            return _td.new_unchecked(_nest(flat) if self.nested else flat, batch_size=batch_size)
        return _td.tree_unflatten([flat[key] for key in self.keys], self.tree_spec)

    def _describe(self) -> str:
        return _describe(self.tree_spec)


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    return tensor if type(tensor) is torch.Tensor else tensor.as_subclass(torch.Tensor)


def _describe(spec: Any) -> str:
    return "TensorDict" if spec is None else f"pytree {spec}"
