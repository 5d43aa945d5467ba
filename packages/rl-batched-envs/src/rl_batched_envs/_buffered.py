"""Batched envs stepped in place: each sub-env's own stepper fills its rows of the batch.

``SerialEnv`` and ``ParallelEnv`` implement ``buffered_stepper``
(``rl_envs_core.extension.SupportsBufferedSteps``) by composition: every sub-env
that has the hook gets the rows ``batch[i]`` of its index and runs the whole batch
of steps through its own stepper (gym's numpy outputs written straight into the
rows). A ``SerialEnv`` runs its sub-envs one after the other in this process; a
``ParallelEnv``'s workers run theirs at the same time, on a shared-memory copy of
the batch, with one message per worker per batch instead of one per step. The
sub-envs are independent, so running each one's steps together gives the data of
the step-by-step path.

The batched env declines (``None``) unless it uses buffers and every sub-env is
unbatched and accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs_core import EnvBase

__all__ = ["GroupFill", "merge_resets"]


class GroupFill:
    """The buffered steps of one group of sub-envs (a ``SerialEnv`` or one worker).

    Args:
        envs: the group's sub-envs.
        offset: the batch index of the first one.

    Examples:
        >>> from rl_envs_core.extension import BufferedRollout
        >>> from rl_envs_core.testing import BufferedCountingEnv
        >>> from rl_batched_envs import SerialEnv
        >>> env = SerialEnv(2, BufferedCountingEnv)
        >>> subs = [BufferedCountingEnv(), BufferedCountingEnv()]
        >>> _ = [sub.rand_step(sub.reset()) for sub in subs]  # through env.step's checks
        >>> fill = GroupFill(subs, 0)
        >>> batch = BufferedRollout.of(env).allocate(3)
        >>> _ = batch["action"].zero_()
        >>> fill.attach(batch)
        >>> fill.prepare()
        True
        >>> fill.fill() is None  # no episode ended
        True
        >>> batch["next", "observation"].squeeze(-1).tolist()
        [[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]]
    """

    def __init__(self, envs: Sequence[EnvBase], offset: int) -> None:
        self.envs = list(envs)
        self.offset = offset
        self.rows: list[TensorDictBase] = []
        self.steppers: list[Any] = []  # Any: each sub-env's BufferedStepper

    def attach(self, batch: TensorDictBase) -> None:
        """Take the rows of ``batch`` (``[num_envs, T]``) that belong to the group."""
        self.rows = [batch[self.offset + j] for j in range(len(self.envs))]

    def prepare(self) -> bool:
        """Make each sub-env's stepper for the attached rows; ``False`` if one declines."""
        self.steppers = []
        for env, rows in zip(self.envs, self.rows):
            hook = getattr(env, "buffered_stepper", None)
            stepper = hook(rows) if callable(hook) and not env.batch_size else None
            if stepper is None:
                self.steppers = []
                return False
            self.steppers.append(stepper)
        return True

    def fill(self, reset_last: bool = True) -> tuple | None:
        """Run every prepared stepper; the resets they made, with batch indices."""
        resets = self._in_batch([stepper.fill(reset_last) for stepper in self.steppers])
        self.steppers = []
        return resets

    def stepwise(self) -> bool:
        """Whether every prepared stepper has the per-step mode (a ``step(t)`` method)."""
        return bool(self.steppers) and all(
            callable(getattr(s, "step", None)) for s in self.steppers
        )

    def step(self, t: int) -> tuple | None:
        """Step every sub-env once (the per-step mode); the resets made, with batch indices."""
        return self._in_batch([stepper.step(t) for stepper in self.steppers])

    def _in_batch(self, per_env: list[tuple | None]) -> tuple | None:
        """Each sub-env's resets (``None``: none), merged and labelled with batch indices."""
        parts = []
        for j, resets in enumerate(per_env):
            if resets is not None:
                steps, _, values = resets
                steps = torch.as_tensor(steps, dtype=torch.long)
                parts.append((steps, torch.full_like(steps, self.offset + j), values))
        return merge_resets(parts)


def merge_resets(parts: Sequence[tuple]) -> tuple | None:
    """One ``(steps, envs, values)`` record out of several (``None`` when there are none).

    A value a part lacks is zeros (as a missing done flag means ``False``).

    Examples:
        >>> one = (torch.tensor([2]), torch.tensor([0]), {"x": torch.ones(1, 2)})
        >>> two = (torch.tensor([0]), torch.tensor([1]), {"x": torch.zeros(1, 2)})
        >>> merge_resets([one, two])[1].tolist()
        [0, 1]
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    keys: dict = {}
    for _, _, values in parts:
        for key, value in values.items():
            keys.setdefault(key, torch.as_tensor(value))
    merged = {}
    for key, example in keys.items():
        chunks = []
        for steps, _, values in parts:
            value = values.get(key)
            if value is None:
                value = example.new_zeros((len(steps), *example.shape[1:]))
            chunks.append(torch.as_tensor(value).to(example.dtype))
        merged[key] = torch.cat(chunks)
    return (
        torch.cat([torch.as_tensor(p[0], dtype=torch.long) for p in parts]),
        torch.cat([torch.as_tensor(p[1], dtype=torch.long) for p in parts]),
        merged,
    )


class SerialFill:
    """The stepper of a ``SerialEnv``: its one group, in this process."""

    def __init__(self, group: Any) -> None:  # Any: the SerialEnv's EnvGroup
        self.group = group
        fill = getattr(group, "_fill", None)
        if fill is not None and fill.stepwise():
            self.step = fill.step  # the per-step mode, when every sub-env's stepper has it

    def fill(self, reset_last: bool = True) -> tuple | None:
        return self.group.fill_batch(reset_last)


class ParallelFill:
    """The stepper of a ``ParallelEnv``: every worker fills its rows at the same time.

    Args:
        env: the ``ParallelEnv``.
        batch: the batch to fill.
        shared: the shared-memory batch the workers write (same layout).
    """

    def __init__(self, env: Any, batch: TensorDictBase, shared: TensorDictBase) -> None:
        self.env, self.batch, self.shared = env, batch, shared

    def fill(self, reset_last: bool = True) -> tuple | None:
        results = self.env._fill_workers(reset_last)
        nxt, shared = self.batch.get("next"), self.shared.get("next")
        for key in nxt.keys(True, True):
            nxt.get(key).copy_(shared.get(key))
        return merge_resets(results)
