"""The ``info`` of a slice sample: end signals and slice-start flags.

A slice sample is ``num_slices`` slices laid end to end. Its info marks, per sampled
step (shape ``[N, 1]``):

* ``truncated``: the last step of every slice (where the sample breaks a trajectory for
  a value estimator);
* ``done``: the stored ``done`` flag at that step, or-ed with ``truncated``;
* ``terminated``: the stored ``terminated`` flag at that step (``False`` when not stored);
* ``is_init`` (only when the data stores one): the stored flag, set on the first step of
  every slice so that a recurrent module restarts its state there.

The keys are ``truncated_key`` and its siblings (``("next", "truncated")`` gives
``("next", "done")`` and ``("next", "terminated")``).
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, unravel_key

from rl_replay.samplers._slice_keys import storage_keys

__all__ = ["INIT_KEY", "SliceInfo"]

INIT_KEY = "is_init"


class SliceInfo:
    """Builds the info dict of slice samples read from one storage.

    Args:
        truncated_key (NestedKey or None): where the slice-end signal goes; ``None``
            gives no end signals.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage
        >>> storage = LazyTensorStorage(4)
        >>> storage.set(range(4), TensorDict({("next", "done"): torch.tensor([[0], [1], [0], [0]]).bool()}, [4]))
        >>> info = SliceInfo(("next", "truncated")).build(
        ...     storage, torch.arange(4), torch.tensor([[False], [True], [False], [True]]))
        >>> info["next", "done"].squeeze(-1).tolist(), info["next", "terminated"].any().item()
        ([False, True, False, True], False)
    """

    def __init__(self, truncated_key: NestedKey | None) -> None:
        self.truncated_key = truncated_key
        prefix = truncated_key[:-1] if isinstance(truncated_key, tuple) else ()
        self.done_key = unravel_key((*prefix, "done"))
        self.terminated_key = unravel_key((*prefix, "terminated"))
        self._keys: frozenset[Any] | None = None  # the stored keys, looked up once

    def reset(self) -> None:
        """Forget the stored keys (the storage was emptied or replaced)."""
        self._keys = None

    def stores(self, storage: Any, key: NestedKey) -> bool:
        """Whether the stored data has an entry ``key``."""
        if self._keys is None:
            keys = storage_keys(storage)
            if keys is None:
                return False  # unknown (yet): look again next time
            self._keys = frozenset(keys)
        return key in self._keys

    def build(
        self, storage: Any, index: Any, slice_end: torch.Tensor, starts: torch.Tensor | None = None
    ) -> dict[Any, torch.Tensor]:
        """The info of a sample at ``index`` whose slices end where ``slice_end`` ([N, 1]) is set.

        Slices start after the previous one ends, unless ``starts`` ([N, 1]) says where.
        """
        info: dict[Any, torch.Tensor] = {}
        if self.truncated_key is not None:
            truncated = slice_end.clone()
            done = self._read(storage, self.done_key, index, truncated)
            terminated = self._read(storage, self.terminated_key, index, truncated)
            info[self.truncated_key] = truncated
            info[self.done_key] = truncated.clone() if done is None else done | truncated
            info[self.terminated_key] = (
                torch.zeros_like(truncated) if terminated is None else terminated
            )
        if self.stores(storage, INIT_KEY):
            stored = self._read(storage, INIT_KEY, index, slice_end)
            if starts is None:
                starts = torch.roll(slice_end, 1, 0)  # a slice starts after the previous one ends
                starts[0] = True
            info[INIT_KEY] = stored | starts.view(-1, *([1] * (stored.ndim - 1)))
        return info

    def _read(
        self, storage: Any, key: NestedKey, index: Any, like: torch.Tensor
    ) -> torch.Tensor | None:
        """The stored flags ``key`` at ``index`` as booleans shaped ``[N, 1, ...]``, or ``None``."""
        if not self.stores(storage, key):
            return None
        if hasattr(storage, "_get_entry"):
            stored = torch.as_tensor(storage._get_entry(key, index))
        else:  # list-like storages: one item per position
            data = storage[index]
            items = data if isinstance(data, (list, tuple)) else [data]
            stored = torch.stack([torch.as_tensor(item.get(key)) for item in items])
        stored = stored.reshape(like.shape[0], *stored.shape[1:]) if stored.ndim else stored
        if stored.ndim == 1:
            stored = stored.unsqueeze(-1)
        return stored.to(device=like.device, dtype=torch.bool)
