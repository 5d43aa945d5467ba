"""``ConditionalPolicySwitch``: another policy acts while a condition holds."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from rl_envs_core import step_mdp
from rl_transforms._base import Transform
from rl_transforms._flow import _parent_env as parent_env

Policy = Callable[[TensorDictBase], TensorDictBase]
Condition = Callable[[TensorDictBase], bool | torch.Tensor]


class ConditionalPolicySwitch(Transform):
    """A transform that conditionally switches between policies based on a specified condition.

    After each reset and step of the parent env, ``condition(data)`` is evaluated;
    where it holds (and the episode goes on), ``policy`` picks the action and the
    parent env steps again, until the condition no longer holds. The outer policy
    therefore only sees the states where it must act (e.g. its own turns in a
    two-player game, the opponent's moves being played by ``policy``).

    Args:
        policy (callable): ``tensordict -> tensordict`` writing the action.
        condition (callable): ``tensordict -> bool`` or a boolean tensor of the batch
            shape (or one element).

    Raises:
        TypeError: if ``policy`` or ``condition`` is not callable, or the condition
            returns something else than a bool or a tensor.
        ValueError: if the condition's tensor does not fit the batch.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> def opponent(td):
        ...     return td.set("action", torch.ones(1, dtype=torch.int64))
        >>> odd = lambda td: bool(td["observation"] % 2 == 1)
        >>> env = TransformedEnv(CountingEnv(max_steps=20), ConditionalPolicySwitch(opponent, odd))
        >>> env.rollout(3)["next", "observation"].squeeze(-1)  # every odd state is skipped
        tensor([2., 4., 6.])
    """

    def __init__(self, policy: Policy, condition: Condition) -> None:
        for name, value in (("policy", policy), ("condition", condition)):
            if not callable(value):
                raise TypeError(
                    f"ConditionalPolicySwitch expected a callable {name}, got "
                    f"{type(value).__name__}."
                )
        super().__init__()
        self.__dict__["policy"] = policy  # not a sub-module: its parameters are not ours
        self.condition = condition

    def _condition(self, data: TensorDictBase) -> torch.Tensor:
        cond = self.condition(data)
        if isinstance(cond, bool):
            cond = torch.tensor(cond, device=data.device)
        if not isinstance(cond, torch.Tensor):
            raise TypeError(
                f"ConditionalPolicySwitch expected condition to return a bool or a boolean "
                f"tensor, got {type(cond).__name__}."
            )
        if cond.numel() == 1:
            return cond.reshape(()).expand(data.batch_size).bool()
        if cond.shape[: data.batch_dims] != data.batch_size or cond.numel() != data.numel():
            raise ValueError(
                f"ConditionalPolicySwitch expected the condition's tensor to have the batch "
                f"shape {tuple(data.batch_size)} (or one element), got {tuple(cond.shape)}."
            )
        return cond.reshape(data.batch_size).bool()

    def _done(self, parent: object, data: TensorDictBase) -> torch.Tensor:
        done = torch.zeros(data.batch_size, dtype=torch.bool, device=data.device)
        for key in parent.done_keys:  # type: ignore[attr-defined] - an env
            value = data.get(key, None)
            if value is not None and value.shape[: data.batch_dims] == data.batch_size:
                done = done | value.reshape(*data.batch_size, -1).any(-1)
        return done

    def _play(
        self, parent: object, state: TensorDictBase, current: TensorDictBase, cond: torch.Tensor
    ) -> TensorDictBase:
        """Let ``policy`` act from ``state`` where ``cond``; ``current`` elsewhere."""
        if cond.all():
            return parent.next_of(self.policy(state))  # type: ignore[attr-defined] - an env
        acted = self.policy(state.copy())
        acted.set("_step", cond)
        stepped = parent.next_of(acted)  # type: ignore[attr-defined]
        kept = current.select(*stepped.keys(True, True), strict=False)
        for key, value in stepped.items(True, True):
            if key not in kept.keys(True, True):  # e.g. no reward after a reset
                kept.set(key, torch.zeros_like(value))
        return torch.where(cond, stepped, kept)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        cond = self._condition(next_tensordict)
        if not cond.any():
            return next_tensordict
        parent = parent_env(self)
        cond = cond & ~self._done(parent, next_tensordict)
        if not cond.any():
            return next_tensordict
        state = step_mdp(tensordict.copy().set("next", next_tensordict))
        return self._play(parent, state, next_tensordict, cond)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        cond = self._condition(tensordict_reset)
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is not None:
            cond = cond & reset.reshape(cond.shape)
        if not cond.any():
            return tensordict_reset
        parent = parent_env(self)
        out = self._play(parent, tensordict_reset, tensordict_reset, cond)
        return out.exclude(*parent.reward_keys)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "ConditionalPolicySwitch cannot be called independently, only its step and reset "
            "methods are functional: it steps its parent environment, so stored data cannot "
            "go through it. Use it in a TransformedEnv."
        )
