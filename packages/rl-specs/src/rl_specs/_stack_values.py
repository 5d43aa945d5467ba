"""Values of lazy stacks of specs: splitting data into the members' parts and checking them."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from ._composite import Composite


class _StackValuesMixin:
    """The value-level methods the lazy stacks share: each member checks its own part."""

    _specs: list
    dim: int
    shape: torch.Size

    def _split_value(self, val: Any, lead: int = 0) -> list:  # Any: a tensor or tensordict
        if isinstance(val, LazyStackedTensorDict) and val.stack_dim == lead + self.dim:
            return list(val.tensordicts)
        if isinstance(val, torch.Tensor) and val.is_nested:
            return list(val.unbind())
        return list(val.unbind(lead + self.dim))

    def _lead(self, val: Any) -> int:  # Any: a tensor or tensordict
        """Number of leading dims ``val`` has in front of the spec's shape."""
        ndim = val.batch_dims if isinstance(val, TensorDictBase) else val.dim()
        return ndim - len(self.shape)

    def assert_is_in(self, value: Any) -> None:  # Any: a tensor or tensordict
        """Check every member's part of ``value``, naming the member that fails.

        Raises:
            TypeError, ValueError, KeyError: as the failing member raises them.
        """
        parts = self._split_value(value, max(self._lead(value), 0))
        for i, (member, part) in enumerate(zip(self._specs, parts, strict=True)):
            try:
                member.assert_is_in(part)
            except (TypeError, ValueError, KeyError) as err:
                raise type(err)(f"Stack member {i}: {err}") from err

    def type_check(self, value: Any, key: Any = None) -> None:  # Any: tensor/tensordict; key
        """Check the dtypes of every member's part of ``value``.

        Raises:
            TypeError: if a part has another dtype than its member.
        """
        if isinstance(value, torch.Tensor) and isinstance(self, Composite):
            self[key].type_check(value, key)  # the tensor is the value of one entry
            return
        parts = self._split_value(value, max(self._lead(value), 0))
        for member, part in zip(self._specs, parts, strict=True):
            member.type_check(part, key)

    def to_numpy(self, val: Any, safe: bool | None = None) -> Any:  # Any: tensor/tensordict
        """``val`` as numpy data: an array, a list of per-member arrays or a dict.

        A dense tensor gives one array and a ragged (nested) one a list of the members'
        arrays; for a stack of composites, a dict of the shared keys that ``val`` holds.

        Args:
            val (torch.Tensor or TensorDictBase): a value of the spec.
            safe (bool, optional): check every member's part with ``assert_is_in`` first.
                Defaults to ``None`` (no check).
        """
        if safe:
            self.assert_is_in(val)
        if isinstance(self, Composite):
            keys = val.keys()
            return {key: self[key].to_numpy(val.get(key)) for key in self if key in keys}
        if val.is_nested:
            return [part.detach().cpu().numpy() for part in val.unbind()]
        return val.detach().cpu().numpy()

    def is_in(self, val: Any) -> bool:  # Any: a tensor or a tensordict
        try:
            parts = self._split_value(val, max(self._lead(val), 0))
        except (RuntimeError, IndexError):
            return False
        return len(parts) == len(self._specs) and all(
            m.is_in(v) for m, v in zip(self._specs, parts, strict=True)
        )
