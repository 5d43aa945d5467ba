"""``env[item]``: a live view on some sub-envs of a running batched env.

Indexing a ``SerialEnv`` / ``ParallelEnv`` along its first (worker) dim returns an
env of the same class whose sub-envs *are* the parent's selected sub-envs: stepping
the view steps them in the parent's process or workers, and the parent sees the
change. A view owns no env and no worker: closing it only retires the view, and it
refuses to run once it or its parent is closed. It keeps its parent alive (so
``env = env[:1]`` works). Boolean masks and assignment (``env[i] = other``) are not
supported.

The parent's hot paths are untouched: the view class is a subclass (made once per
batched class) whose ``_step`` / ``_reset`` run the functions below on the parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase

from rl_batched_envs._selection import normalize_index, reset_targets
from rl_envs_core import EnvBase
from rl_envs_core.extension import install_stacked_specs, key_layout

if TYPE_CHECKING:
    from rl_batched_envs._batched import BatchedEnvBase


def _positions(mask: torch.Tensor | None, n: int) -> list[int]:
    if mask is None:
        return list(range(n))
    return [i for i, f in enumerate(mask.reshape(n, -1).any(-1).tolist()) if f]


def step_envs(parent: BatchedEnvBase, envs: list[int], tensordict: TensorDictBase) -> Any:
    """Step the parent's sub-envs ``envs`` with ``tensordict`` (batched like them);
    return their ``"next"`` data."""
    parent._ensure_started()
    mask = tensordict.get("_step", None)
    chosen = [envs[p] for p in _positions(mask, len(envs))]
    if not parent._use_buffers:
        inputs = [tensordict[p] for p in _positions(mask, len(envs))]
        for i, nxt in parent._pickled("step", chosen, inputs, ()).items():
            parent._last_next[i] = nxt
        return parent._stack([parent._last_next[i] for i in envs])
    idx = torch.tensor(envs)
    for pairs in (parent._in_pairs, parent._previous_pairs):
        for key, buf in pairs:
            value = tensordict.get(key, None)
            if isinstance(value, torch.Tensor) and value.shape[1:] == buf.shape[1:]:
                buf[idx] = value.to(buf.device)
    parent._mark_root_stale()
    partial = mask is not None and len(parent.batch_size) > 1
    if partial:
        rows = parent._mask_buf.get("_step")
        rows[idx] = mask.reshape(len(envs), *rows.shape[1:]).to(rows.device)
    if chosen:
        route = parent._route(chosen)
        parent._call_each("step", {w: (local, None, partial) for w, local in route.items()})
    out = parent._next_buf[idx]
    return out.to(parent.device) if parent.device is not None else out


def reset_envs(
    parent: BatchedEnvBase,
    envs: list[int],
    tensordict: TensorDictBase | None,
    kwargs: dict,
) -> TensorDictBase:
    """Reset the parent's sub-envs ``envs`` (as ``_reset`` masks in ``tensordict``
    select); return their data."""
    parent._ensure_started()
    found, picked = reset_targets(tensordict, key_layout(parent)["reset_keys"], len(envs))
    positions = list(range(len(envs))) if picked is None else picked
    chosen = [envs[p] for p in positions]
    if not parent._use_buffers:
        inputs = [tensordict[p].select(*found) if found else None for p in positions]
        for i, out in parent._pickled("reset", chosen, inputs, ((), kwargs)).items():
            parent._last_root[i] = out
        return parent._stack([parent._last_root[i] for i in envs])
    idx = torch.tensor(envs)
    for key in found:
        buf = parent._mask_buf.get(key)
        buf[idx] = tensordict.get(key).reshape(len(envs), *buf.shape[1:]).to(buf.device)
    if chosen:
        route = parent._route(chosen)
        parent._call_each("reset", {w: (j, None, found, kwargs) for w, j in route.items()})
    out = parent._root_buf[idx]
    out = out.to(parent.device) if parent.device is not None else out
    if picked is not None and tensordict is not None:
        parent._keep_previous(out, tensordict, positions)
    return out


class IndexedView:
    """Mixin of the view classes (see :func:`view_class`); ``BatchedEnvBase`` is next
    in their MRO."""

    def __init__(self, parent: BatchedEnvBase, envs: list[int]) -> None:
        sub_batch = parent.batch_size[1:]
        EnvBase.__init__(self, device=parent.device, batch_size=[len(envs), *sub_batch])
        state = self.__dict__
        state["_parent"] = parent
        state["_envs"] = list(envs)
        state["_num_workers"] = len(envs)
        state["_use_buffers"] = False  # the generic step_and_maybe_reset, through _step
        state["_view_closed"] = False
        specs, lazy = parent._specs_of(envs)
        install_stacked_specs(self, specs, lazy=lazy)
        self.set_spec_lock_(True)

    @property
    def parent(self) -> BatchedEnvBase:
        """The batched env whose sub-envs this view runs."""
        return self.__dict__["_parent"]

    @property
    def env_indices(self) -> list[int]:
        """The parent's indices of the sub-envs of this view."""
        return list(self.__dict__["_envs"])

    def _ensure_started(self) -> None:
        if self.__dict__["_view_closed"]:
            raise RuntimeError(
                f"This {type(self).__name__} is a closed indexed view of a batched env. Index "
                f"the parent env again (env[...]) for a new view."
            )
        parent = self.__dict__["_parent"]
        if not parent._running or parent.is_closed:
            self.__dict__["is_closed"] = True
            raise RuntimeError(
                f"This {type(self).__name__} is an indexed view whose parent environment has "
                f"been closed. Restart the parent (parent.start()) and index it again."
            )

    def start(self) -> None:
        """Check that the view can run (a view never starts envs of its own)."""
        self._ensure_started()

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Retire the view; the parent and its sub-envs keep running.

        Raises:
            RuntimeError: on a repeated ``close()`` with ``raise_if_closed`` set.
        """
        if raise_if_closed and self.__dict__["_view_closed"]:
            raise RuntimeError(
                f"{type(self).__name__}.close() was called on an indexed view that is already "
                f"closed. Pass raise_if_closed=False to make a repeated close a no-op."
            )
        self.__dict__["_view_closed"] = True
        self.__dict__["is_closed"] = True

    def update_kwargs(self, kwargs: Any) -> None:  # Any: see BatchedEnvBase.update_kwargs
        """Not available on a view: the sub-envs belong to the parent."""
        raise RuntimeError(
            "update_kwargs() rebuilds sub-envs, which belong to the parent of this indexed "
            "view. Call it on the parent env."
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._ensure_started()
        return step_envs(self.__dict__["_parent"], self.__dict__["_envs"], tensordict)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        self._ensure_started()
        return reset_envs(self.__dict__["_parent"], self.__dict__["_envs"], tensordict, kwargs)

    def _seed_chain(self, seed: int | None, static_seed: bool) -> int | None:
        self._ensure_started()
        return self.__dict__["_parent"]._seed_chain(seed, static_seed, self.__dict__["_envs"])

    def _forward(self, name: str, envs: list[int] | None = None) -> Any:  # Any: forwarded
        self._ensure_started()
        mine = self.__dict__["_envs"]
        envs = mine if envs is None else [mine[i] for i in envs]
        return self.__dict__["_parent"]._forward(name, envs)

    def __getitem__(self, item: Any) -> BatchedEnvBase:  # Any: see normalize_index
        mine = self.__dict__["_envs"]
        picked = [mine[i] for i in normalize_index(item, len(mine))]
        parent = self.__dict__["_parent"]
        return view_class(type(parent))(parent, picked)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(view of envs {self.__dict__['_envs']}, "
            f"batch_size={tuple(self.batch_size)}, device={self.device})"
        )


_VIEW_CLASSES: dict[type, type] = {}


def view_class(cls: type) -> type:
    """The view class of the batched class ``cls`` (a subclass, so ``isinstance`` holds)."""
    view = _VIEW_CLASSES.get(cls)
    if view is None:
        view = type(cls.__name__, (IndexedView, cls), {"__module__": cls.__module__})
        _VIEW_CLASSES[cls] = view
    return view
