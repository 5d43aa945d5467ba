"""``DataCollectorBase``: iteration, frame accounting and what every collector shares.

A collector yields batches until ``total_frames`` frames were collected (forever
with ``total_frames=-1``). Each raw batch goes through the same finishing steps:
optional trajectory split, ``postproc``, then either is yielded or, with a
``replay_buffer``, written into the buffer (the iteration then yields ``None``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_batched_envs._stacking import EnvFactory
from rl_batched_envs.collectors._split import split_trajectories
from rl_envs_core import EnvBase

#: ``total_frames`` value (and default) meaning "collect until stopped".
ENDLESS = -1


#: TorchRL keyword arguments accepted for compatibility and without effect here.
IGNORED_OPTIONS = frozenset(
    {
        "auto_register_policy_transforms",
        "compile_policy",
        "cudagraph_policy",
        "extend_buffer",
        "interruptor",
        "no_cuda_sync",
        "policy_factory",
        "return_same_td",
        "use_buffers",
        "weight_recv_schemes",
        "weight_sync_schemes",
        "weight_updater",
        "worker_idx",
    }
)


def make_env(create_env_fn: EnvBase | EnvFactory, create_env_kwargs: dict | None) -> EnvBase:
    """The env itself, or what the factory builds.

    Raises:
        TypeError: the argument is neither an env nor a callable returning one.
    """
    if isinstance(create_env_fn, EnvBase):
        return create_env_fn
    if not callable(create_env_fn):
        raise TypeError(
            f"create_env_fn must be an EnvBase or a callable returning one, got "
            f"{type(create_env_fn).__name__}."
        )
    env = create_env_fn(**(create_env_kwargs or {}))
    if not isinstance(env, EnvBase):
        raise TypeError(
            f"create_env_fn {create_env_fn!r} returned {type(env).__name__}, not an EnvBase. "
            f"Return an env (e.g. GymEnv('CartPole-v1'))."
        )
    return env


def env_factories(
    create_env_fn: Any, count: int | None, owner: str, *, count_name: str, unit: str
) -> list:  # Any: one factory or a sequence of them
    """One env factory per ``unit`` (worker or collector): a sequence as given, or one
    factory repeated ``count`` times (default 1).

    Raises:
        ValueError: an empty sequence, a sequence whose length is not ``count``, or a
            ``count`` that is not a positive int.
    """
    if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, str):
        fns = list(create_env_fn)
        if not fns:
            raise ValueError(f"{owner} needs at least one env factory, got an empty list.")
        if count is not None and count != len(fns):
            raise ValueError(
                f"{owner} got {len(fns)} env factories but {count_name}={count}. Pass one "
                f"factory per {unit}, or a single factory with {count_name}."
            )
        return fns
    count = 1 if count is None else count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{owner} expected {count_name} to be a positive int, got {count!r}.")
    return [create_env_fn] * count


def check_options(kwargs: dict, owner: str) -> None:
    """Refuse keyword arguments that are neither ours nor TorchRL's.

    Raises:
        TypeError: an unknown keyword (a typo, most likely).
    """
    unknown = sorted(set(kwargs) - IGNORED_OPTIONS)
    if unknown:
        raise TypeError(
            f"{owner} got unexpected keyword argument(s) {unknown}. Accepted TorchRL "
            f"options without effect here: {sorted(IGNORED_OPTIONS)}."
        )
    if kwargs.get("policy_factory") is not None:
        raise TypeError(
            f"{owner} does not take policy_factory; pass the policy itself (it is "
            f"shared with worker processes through shared memory)."
        )


def round_frames(frames_per_batch: int, n_env: int, owner: str) -> int:
    """``frames_per_batch`` rounded up to a multiple of ``n_env`` (warning when changed).

    Raises:
        ValueError: ``frames_per_batch`` is not a positive int.
    """
    if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
        raise ValueError(
            f"{owner} expected frames_per_batch to be a positive int, got {frames_per_batch!r}."
        )
    rounded = -(-frames_per_batch // n_env) * n_env
    if rounded != frames_per_batch:
        warnings.warn(
            f"{owner}: frames_per_batch={frames_per_batch} is not a multiple of the "
            f"{n_env} envs of the batch; each batch holds {rounded} frames "
            f"({rounded // n_env} steps of every env). Pass a multiple of {n_env} to "
            f"silence this warning.",
            UserWarning,
            stacklevel=3,
        )
    return rounded


def check_total_frames(total_frames: int | None, owner: str) -> float:
    """``total_frames`` as a number (``inf`` for ``-1`` / ``None``).

    Raises:
        ValueError: ``total_frames`` is 0 or below -1.
    """
    if total_frames is None or total_frames == ENDLESS:
        return math.inf
    if not isinstance(total_frames, int) or total_frames < 1:
        raise ValueError(
            f"{owner} expected total_frames to be a positive int or -1 (endless), got "
            f"{total_frames!r}."
        )
    return total_frames


def check_buffer_fits(replay_buffer: Any, batch: TensorDictBase, owner: str) -> None:  # Any: duck
    """Raise when the buffer's storage cannot hold one batch (checked by duck typing).

    The storage's ``max_size`` counts elements over its first ``ndim`` dims (the
    convention of the replay buffer storages), so a batch needs the product of its
    first ``ndim`` dims.

    Raises:
        ValueError: one batch is larger than the storage.
    """
    storage = getattr(replay_buffer, "storage", None) or getattr(replay_buffer, "_storage", None)
    max_size = getattr(storage, "max_size", None)
    if not isinstance(max_size, int):
        return
    ndim = getattr(storage, "ndim", 1) or 1
    needed = math.prod(batch.batch_size[:ndim]) if batch.batch_dims else 1
    if needed > max_size:
        raise ValueError(
            f"{owner}: one batch of shape {tuple(batch.batch_size)} needs {needed} elements "
            f"of the replay buffer's storage (ndim={ndim}), which holds max_size={max_size}. "
            f"Use a storage of at least {needed} elements or a smaller frames_per_batch."
        )


class DataCollectorBase:
    """Base class of the data collectors: iterate over it to get batches of data.

    Subclasses implement :meth:`_next_raw` (one raw batch), :meth:`shutdown`,
    :meth:`set_seed`, :meth:`state_dict`/:meth:`load_state_dict` and
    :meth:`update_policy_weights_`.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_batched_envs import SyncDataCollector
        >>> collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=4, total_frames=8)
        >>> isinstance(collector, DataCollectorBase), len(collector)
        (True, 2)
        >>> collector.shutdown()
    """

    total_frames: float
    frames_per_batch: int
    postproc: Callable[[TensorDictBase], TensorDictBase] | None
    split_trajs: bool
    replay_buffer: Any  # Any: duck-typed, anything with extend()
    _frames: int
    _iter: int
    _rb_checked: bool

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        return self.iterator()

    def __len__(self) -> int:
        if math.isinf(self.total_frames):
            raise RuntimeError(
                f"{type(self).__name__} has no length: total_frames=-1 collects until stopped."
            )
        return -(-int(self.total_frames) // self.frames_per_batch)

    def iterator(self) -> Iterator[TensorDictBase | None]:
        """Yield batches until ``total_frames`` frames were collected.

        With a ``replay_buffer``, each batch is written into the buffer and ``None``
        is yielded instead.
        """
        while self._frames < self.total_frames:
            self._iter += 1
            batch = self._next_raw()
            self._frames += batch.numel()
            yield self._finish(batch)

    def next(self) -> TensorDictBase | None:
        """One batch (what the next step of the iteration gives)."""
        if self._frames >= self.total_frames:
            raise StopIteration(f"{type(self).__name__} already collected {self._frames} frames.")
        self._iter += 1
        batch = self._next_raw()
        self._frames += batch.numel()
        return self._finish(batch)

    def _finish(self, batch: TensorDictBase) -> TensorDictBase | None:
        if self.split_trajs:
            batch = split_trajectories(batch)
        if self.postproc is not None:
            batch = self.postproc(batch)
        if self.replay_buffer is None:
            return batch
        if not self._rb_checked:
            check_buffer_fits(self.replay_buffer, batch, type(self).__name__)
            self._rb_checked = True
        self.replay_buffer.extend(batch)
        return None

    def _next_raw(self) -> TensorDictBase:
        """The next collected batch, before postproc and buffer (each collector class implements it)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _next_raw().")

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        """Release the envs and worker processes; idempotent."""

    def __enter__(self) -> DataCollectorBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _base_state(self) -> dict[str, Any]:  # Any: counters
        return {"frames": self._frames, "iter": self._iter}

    def _load_base_state(self, state: dict[str, Any]) -> None:  # Any: counters
        self._frames = int(state.get("frames", self._frames))
        self._iter = int(state.get("iter", self._iter))

    def update_policy_weights_(
        self,
        policy_or_weights: TensorDictBase | torch.nn.Module | dict | None = None,
        **kwargs: Any,  # Any: accepted for TorchRL compatibility (worker_ids, ...)
    ) -> None:
        """Bring the policy used for collection up to date with the given weights."""
        raise NotImplementedError(f"{type(self).__name__} must implement update_policy_weights_().")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames})"
        )
