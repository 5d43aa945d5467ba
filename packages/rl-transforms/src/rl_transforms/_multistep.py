"""The replay-buffer :class:`MultiStepTransform`, on top of ``rl_replay.MultiStep``.

rl-transforms does not depend on rl-replay; this transform needs it and imports it
when built (the ``replay`` extra: ``pip install 'rl-transforms[replay]'``). The
n-step computation lives once, in ``rl_replay.MultiStep``; this module only adds
the buffer of the last steps that makes the result independent of how the data
was chunked.
"""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_transforms._backends import require
from rl_transforms._base import Transform
from rl_transforms._key_lists import as_tuple

REPLAY = "replay"


class MultiStepTransform(Transform):
    """A MultiStep transformation for ReplayBuffers.

    An inverse transform (applied by ``ReplayBuffer.extend``): the incoming steps
    (time along the last batch dim) are appended to the last ``n_steps`` steps of
    the previous call, rewritten with ``rl_replay.MultiStep`` (n-step discounted
    rewards, ``"next"`` entries from ``n_steps - 1`` steps later, ``gamma``,
    ``steps_to_next_obs`` and ``nonterminal``) and the steps followed by at least
    ``n_steps`` others are written; the last ``n_steps`` wait for the next call. The
    first call thus writes ``n_steps`` fewer steps than it received, the next ones as
    many. A single transition (batch size ``[]``, as ``ReplayBuffer.add`` passes it)
    is one step.

    Args:
        n_steps (int): the number of steps of each return.
        gamma (float): the discount factor.

    Keyword Args:
        reward_keys (list of NestedKey, optional): rewards to accumulate; the
            original is kept at ``("next", <key>_orig)`` (and the first one's at
            ``("next", "original_reward")`` too). Defaults to ``["reward"]``.
        done_key (NestedKey, optional): ends trajectories. Defaults to ``"done"``.
        done_keys (list of NestedKey, optional): entries left untouched. Defaults to
            ``["done", "terminated", "truncated"]``.
        mask_key (NestedKey, optional): valid-step mask. Defaults to ``None``.

    Raises:
        ImportError: when built without rl-replay installed.
        RuntimeError: when used as an env transform.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = MultiStepTransform(n_steps=3, gamma=1.0)
        >>> obs = torch.arange(11.0)
        >>> def chunk(a, b):
        ...     return TensorDict({"obs": obs[a:b], "next": {"obs": obs[a + 1:b + 1],
        ...         "reward": torch.ones(b - a, 1), "done": torch.zeros(b - a, 1, dtype=torch.bool)}},
        ...         [b - a])
        >>> t.inv(chunk(0, 5))["next", "obs"]
        tensor([3., 4.])
        >>> out = t.inv(chunk(5, 10))
        >>> out["obs"], out["next", "obs"], out["next", "reward"].squeeze(-1)
        (tensor([2., 3., 4., 5., 6.]), tensor([5., 6., 7., 8., 9.]), tensor([3., 3., 3., 3., 3.]))
    """

    def __init__(
        self,
        n_steps: int,
        gamma: float,
        *,
        reward_keys: list[NestedKey] | None = None,
        done_key: NestedKey | None = None,
        done_keys: list[NestedKey] | None = None,
        mask_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        rl_replay = require("rl_replay", owner="MultiStepTransform", extra=REPLAY)
        self._multi_step = rl_replay.MultiStep(gamma, n_steps)  # validates gamma and n_steps
        self.n_steps = n_steps
        self.gamma = gamma
        self.reward_keys = list(reward_keys) if reward_keys is not None else ["reward"]
        self.done_key = done_key if done_key is not None else "done"
        self.done_keys = (
            list(done_keys) if done_keys is not None else ["done", "terminated", "truncated"]
        )
        self.mask_key = mask_key
        self._buffer: TensorDictBase | None = None

    def _configure(self) -> None:
        ms = self._multi_step
        ms.gamma, ms.n_steps = self.gamma, self.n_steps
        ms.reward_keys, ms.done_key, ms.done_keys = self.reward_keys, self.done_key, self.done_keys
        ms.mask_key = self.mask_key

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not tensordict.batch_dims:  # a single transition (ReplayBuffer.add)
            tensordict = tensordict.unsqueeze(0)
        time = tensordict.batch_dims - 1
        data = tensordict
        if self._buffer is not None:
            data = torch.cat([self._buffer, tensordict], time)
        originals = {k: data.get(("next", *as_tuple(k))) for k in self.reward_keys}
        self._configure()
        out = self._multi_step(data)
        for key, value in originals.items():
            key = as_tuple(key)
            out.set(("next", *key[:-1], key[-1] + "_orig"), value)
        steps = data.batch_size[time]
        keep = min(self.n_steps, steps)
        self._buffer = data[(Ellipsis, slice(steps - keep, steps))] if keep else None
        if self._buffer is not None and self._buffer.batch_size[time] == 0:
            self._buffer = None
        return out[(Ellipsis, slice(0, steps - keep))]

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._inv_call(tensordict.copy())

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Sampled data passes unchanged (the work is done at write time)."""
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "MultiStepTransform is an inverse transform for replay buffers; it cannot run in an "
            "env. Pass it to ReplayBuffer(transform=...) instead."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._step(next_tensordict, next_tensordict)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_steps={self.n_steps}, gamma={self.gamma})"
