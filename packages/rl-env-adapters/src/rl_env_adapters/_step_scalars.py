"""``StepScalars``: the reward and done flags of an unbatched step, cut from blocks.

An unbatched gym step yields four one-element tensors (reward, terminated,
truncated, done). Making each one (a numpy array, then ``torch.from_numpy``) costs
about a microsecond, a large share of a CartPole step. Here the tensors are rows of
preallocated blocks, cut all at once by ``unbind`` (about 0.4 µs a row) and filled
through numpy views of the blocks. Every row is handed out once, so no two steps
share memory: each step's tensors are as fresh as newly allocated ones.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["StepScalars"]


class StepScalars:
    """Hands out ``(reward, terminated, truncated, done)`` tensors of shape ``[1]``.

    Args:
        rows (int, optional): steps served by one block. Defaults to ``256``.

    Examples:
        >>> scalars = StepScalars(rows=2)
        >>> [scalars(1.5, False, True) for _ in range(3)][-1]
        (tensor([1.5000]), tensor([False]), tensor([True]), tensor([True]))
    """

    def __init__(self, rows: int = 256) -> None:
        self.rows = rows
        self._next = rows  # the first call cuts a block

    def _cut(self) -> None:
        reward = torch.zeros(self.rows, 1)
        flags = torch.zeros(3, self.rows, 1, dtype=torch.bool)
        self._reward_np = reward.numpy()[:, 0]
        self._flags_np = flags.numpy()[:, :, 0]  # [3, rows]: terminated, truncated, done
        self._rows = list(zip(reward.unbind(0), *(f.unbind(0) for f in flags.unbind(0))))
        self._next = 0

    def __call__(
        self, reward: Any, terminated: bool, truncated: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Fresh tensors holding ``reward`` and the flags (``done`` is their OR)."""
        if self._next == self.rows:
            self._cut()
        i = self._next
        self._next = i + 1
        try:
            self._reward_np[i] = reward
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"The gym env's step returned reward={reward!r} ({type(reward).__name__}); an "
                f"unbatched env's 'reward' must be one number (float or numpy scalar), stored "
                f"with shape (1,). Return a scalar reward from step(), or wrap the env with a "
                f"gymnasium.Wrapper that does."
            ) from err
        flags = self._flags_np
        flags[0, i] = terminated
        flags[1, i] = truncated
        flags[2, i] = terminated or truncated
        return self._rows[i]
