"""``StepRecorder``: per-entry lists of step tensors, stacked once into the batch.

Each step appends the tensors the env and the policy produced (references, no
copy, no tensordict) to one list per entry; :meth:`StepRecorder.finish` stacks
each list along the time dim straight into the batch's storage (``out=`` a
preallocated batch when given). An env that hands back the same tensor object or
memory at every step (a reused output buffer) is detected on the first two steps,
and its entries are then cloned as they are recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_envs_core.extension import entries, get_entry

_PROBE_STEPS = 2


def _flat_key(key: NestedKey) -> NestedKey:
    return key[0] if isinstance(key, tuple) and len(key) == 1 else key


def _insert(tree: dict, key: NestedKey, value: torch.Tensor) -> None:
    if isinstance(key, str):
        tree[key] = value
        return
    for part in key[:-1]:
        tree = tree.setdefault(part, {})
    tree[key[-1]] = value


class StepRecorder:
    """Collects one batch of steps of a ``[*batch]`` env.

    Args:
        batch_size: the env's batch size; the time dim follows it.
        root_skip: root entries never recorded (the env's rewards: a root that is
            the previous step's ``"next"`` still holds them). Defaults to none.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> rec = StepRecorder(torch.Size([]))
        >>> rec.start(2)
        >>> for t in range(2):
        ...     root = TensorDict({"a": torch.tensor([float(t)])}, [])
        ...     nxt = TensorDict({"a": torch.tensor([t + 1.0])}, [])
        ...     root["next"] = nxt
        ...     rec.record(root, nxt, None)
        >>> rec.finish(None, None)["next", "a"].squeeze(-1)
        tensor([1., 2.])
    """

    def __init__(self, batch_size: torch.Size, root_skip: Sequence[NestedKey] = ()) -> None:
        self.batch_size = torch.Size(batch_size)
        self.root_skip = {_flat_key(k) for k in root_skip}
        self.dim = len(self.batch_size)
        self.root_keys: list[NestedKey] | None = None
        self.next_keys: list[NestedKey] = []
        self.lists: list[list[torch.Tensor]] = []
        self.ids: list[torch.Tensor | None] = []
        self.cloned: set[int] = set()
        self._probe: list[list[int]] = []
        self.steps = 0
        self.flat = False

    def start(self, steps: int) -> None:
        """Begin a batch of ``steps`` steps."""
        self.steps = steps
        self.lists = [[] for _ in self.lists]
        self.ids = []

    def _discover(self, data: TensorDictBase, nxt: TensorDictBase) -> None:
        root = [
            key
            for key in map(_flat_key, data.keys(True, True))
            if not _is_next(key) and key not in self.root_skip
        ]
        self.root_keys = root
        self.next_keys = [_flat_key(k) for k in nxt.keys(True, True)]
        self.lists = [[] for _ in range(len(root) + len(self.next_keys))]
        self.flat = all(isinstance(k, str) for k in root + self.next_keys)
        self.cloned, self._probe = set(), []  # entries changed: probe them again

    def record(self, data: TensorDictBase, nxt: TensorDictBase, ids: torch.Tensor | None) -> None:
        """Append one step: root entries from ``data``, next entries from ``nxt``."""
        if self.root_keys is None:
            self._discover(data, nxt)
        lists = self.lists
        if self.flat and type(data) is TensorDict and type(nxt) is TensorDict:
            root, after = entries(data), entries(nxt)
            values = [root.get(key) for key in self.root_keys]
            values += [after.get(key) for key in self.next_keys]
        else:
            values = [get_entry(data, key) for key in self.root_keys]
            values += [get_entry(nxt, key) for key in self.next_keys]
        if len(self._probe) < _PROBE_STEPS:
            values = self._probe_step(values)
        elif self.cloned:
            values = [v.clone() if i in self.cloned else v for i, v in enumerate(values)]
        for lst, value in zip(lists, values):
            lst.append(value)
        self.ids.append(ids)

    def _probe_step(self, values: list) -> list:
        keys = self.root_keys + self.next_keys
        for i, value in enumerate(values):
            if value is None:
                raise KeyError(
                    f"The entry {keys[i]!r} of the first step is missing at a later step; a "
                    f"collector needs the same entries at every step. Declare it in the "
                    f"env's specs so that reset and step always write it."
                )
        ptrs = [v.data_ptr() if v.numel() else -1 for v in values]
        if self._probe:
            for i, (old, new) in enumerate(zip(self._probe[-1], ptrs)):
                if old == new and new != -1:
                    self.cloned.add(i)
        self._probe.append(ptrs)
        return [v.clone() for v in values]

    def finish(self, out: TensorDictBase | None, traj_key: NestedKey | None) -> TensorDictBase:
        """Stack the recorded steps into a ``[*batch, time]`` tensordict.

        The steps go into ``out`` when it has exactly the recorded entries, with
        their shapes and dtypes (then ``out`` is returned); otherwise (``None``, or
        a batch of another layout, e.g. one collected before a policy added an
        entry) into a new tensordict, which the caller tells from ``out`` by identity.
        """
        dim = self.dim
        keys = self.root_keys + [("next", *_as_tuple(k)) for k in self.next_keys]
        stack: Callable = torch.stack
        if out is not None and self._fits(out, keys, traj_key):
            for key, lst in zip(keys, self.lists):
                stack(lst, dim, out=out.get(key))
            if traj_key is not None:
                stack(self.ids, dim, out=out.get(traj_key))
            return out
        tree: dict = {}
        for key, lst in zip(keys, self.lists):
            _insert(tree, key, stack(lst, dim))
        if traj_key is not None:
            _insert(tree, traj_key, stack(self.ids, dim))
        batch = TensorDict(tree, batch_size=[*self.batch_size, self.steps])
        batch.names = [None] * dim + ["time"]
        return batch


    def _fits(
        self, out: TensorDictBase, keys: list[NestedKey], traj_key: NestedKey | None
    ) -> bool:
        """Whether ``out`` holds exactly the recorded entries, each in its stacked layout."""
        wanted = {_as_tuple(k): lst[0] for k, lst in zip(keys, self.lists)}
        if traj_key is not None:
            wanted[_as_tuple(traj_key)] = self.ids[0]
        if {_as_tuple(k) for k in out.keys(True, True)} != set(wanted):
            return False
        size = (*self.batch_size, self.steps)
        for key, first in wanted.items():
            value = out.get(key)
            if value.dtype != first.dtype or value.shape != (*size, *first.shape[self.dim :]):
                return False
        return True


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _is_next(key: NestedKey) -> bool:
    return key == "next" or (isinstance(key, tuple) and key[0] == "next")
