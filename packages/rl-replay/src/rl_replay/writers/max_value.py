"""The ranking writer :class:`TensorDictMaxValueWriter`."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import is_tensor_collection
from tensordict.utils import NestedKey

from rl_replay.writers.base import Writer

__all__ = ["TensorDictMaxValueWriter"]

_MAX_ROWS = 1 << 40
_RANK_DTYPE = torch.float64

_REDUCTIONS = {
    "sum": lambda t: t.sum(-1),
    "mean": lambda t: t.mean(-1),
    "max": lambda t: t.max(-1).values,
    "min": lambda t: t.min(-1).values,
    "median": lambda t: t.median(-1).values,
}


class TensorDictMaxValueWriter(Writer):
    """A Writer class for composable replay buffers that keeps the top elements based on some ranking key.

    Each element gets a rank: the entry ``rank_key`` reduced over its non-batch
    dims with ``reduction``.  While the storage has room, elements are appended;
    once it is full an incoming element replaces the lowest-ranked stored one
    only if its rank is higher.

    Args:
        rank_key (NestedKey, optional): the entry to rank by. Defaults to ``("next", "reward")``.
        reduction (str, optional): one of ``"sum"``, ``"mean"``, ``"max"``, ``"min"``,
            ``"median"``. Defaults to ``"sum"``.

    Raises:
        ValueError: if ``reduction`` is unknown, or at write time if the storage has ``ndim > 1``.
        TypeError: at write time, if the data is not a tensordict.
        KeyError: at write time, if ``rank_key`` is missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import LazyTensorStorage, TensorDictReplayBuffer, TensorDictMaxValueWriter
        >>> rb = TensorDictReplayBuffer(
        ...     storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter(rank_key="key"))
        >>> _ = rb.extend(TensorDict({"key": torch.tensor([1.0, 5.0, 3.0, 0.0])}, [4]))
        >>> sorted(rb[:]["key"].tolist())
        [3.0, 5.0]
    """

    def __init__(
        self, rank_key: NestedKey | None = None, reduction: str = "sum", **kwargs: Any
    ) -> None:
        # kwargs: forwarded to Writer (compilable).
        super().__init__(**kwargs)
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"TensorDictMaxValueWriter expected reduction in {sorted(_REDUCTIONS)}, got {reduction!r}."
            )
        self._rank_key = ("next", "reward") if rank_key is None else rank_key
        self._reduction = reduction
        self._ranks: torch.Tensor | None = None

    def _rank(self, data: Any) -> torch.Tensor:
        if not is_tensor_collection(data):
            raise TypeError(
                f"TensorDictMaxValueWriter expected a tensordict, got {type(data).__name__}."
            )
        if self._rank_key not in data.keys(True):
            raise KeyError(
                f"TensorDictMaxValueWriter expected the rank key {self._rank_key!r} in the data; "
                f"found keys {sorted(str(k) for k in data.keys(True, True))}."
            )
        # ranks live in float64 whatever torch's default dtype is
        value = data.get(self._rank_key).to(_RANK_DTYPE).reshape(data.shape[0], -1)
        return _REDUCTIONS[self._reduction](value)

    def _ensure_ranks(self, item: Any) -> int:
        storage = self._require_storage()
        if getattr(storage, "ndim", 1) != 1:
            raise ValueError(
                f"TensorDictMaxValueWriter expected a storage with ndim=1, got ndim={storage.ndim}."
            )
        prepare = getattr(storage, "_rows_for_write", None)
        rows = storage.max_size if prepare is None else prepare(item, True)
        if rows > _MAX_ROWS:
            raise ValueError(
                f"TensorDictMaxValueWriter expected a bounded storage, got max_size={rows}. "
                "Give the storage a max_size."
            )
        if self._ranks is None or self._ranks.numel() != rows:
            self._ranks = torch.full((rows,), -torch.inf, dtype=_RANK_DTYPE)
        return rows

    def add(self, data: Any) -> int | None:  # Any: a tensordict
        """Write ``data`` if it ranks high enough; return its position or ``None``."""
        index = self.extend(data.unsqueeze(0) if is_tensor_collection(data) else data)
        return int(index[0]) if index.numel() else None

    def extend(self, data: Any) -> torch.Tensor:  # Any: a tensordict
        """Write the elements of ``data`` that rank among the top ``max_size``; return their positions."""
        ranks = self._rank(data)
        rows = self._ensure_ranks(data[0])
        pool = torch.cat([self._ranks, ranks])
        keep = pool.topk(min(rows, pool.numel()), sorted=False).indices
        new_ids = (keep[keep >= rows] - rows).sort().values  # arrival order
        new_ids = new_ids[ranks[new_ids] > -torch.inf]
        if new_ids.numel() == 0:
            return torch.empty(0, dtype=torch.long)
        kept_old = torch.zeros(rows, dtype=torch.bool)
        kept_old[keep[keep < rows]] = True
        kept_old &= self._ranks > -torch.inf
        free = (~kept_old).nonzero().squeeze(-1)[: new_ids.numel()]
        new_ids = new_ids[: free.numel()]
        self._storage.set(free, data[new_ids])
        self._ranks[free] = ranks[new_ids]
        return free

    def _empty(self) -> None:
        self._ranks = None

    def state_dict(self) -> dict[str, Any]:
        return {"_ranks": self._ranks if self._ranks is not None else torch.empty(0)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ranks = state_dict["_ranks"]
        self._ranks = ranks.to(_RANK_DTYPE).clone() if ranks.numel() else None
