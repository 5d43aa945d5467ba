"""``RandomPolicy``: a policy that samples its action from an action spec."""

from __future__ import annotations

from tensordict import NestedKey, TensorDictBase

from rl_specs import Composite, TensorSpec

__all__ = ["RandomPolicy"]


class RandomPolicy:
    """A random policy for data collectors.

    Each call draws a fresh sample from ``action_spec`` and writes it into the
    input tensordict. A :class:`~rl_specs.Composite` spec writes all its entries
    (so a nested multi-agent action lands at its own keys); any other spec writes
    one tensor at ``action_key``.

    Args:
        action_spec (TensorSpec): the spec to sample from. It is cloned, so later
            changes to the environment's spec do not leak into the policy.
        action_key (NestedKey, optional): where a non-composite sample is written.
            Defaults to ``"action"``.

    Raises:
        TypeError: if ``action_spec`` is not a ``TensorSpec``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_specs import Bounded
        >>> actor = RandomPolicy(Bounded(-torch.ones(3), torch.ones(3)))
        >>> td = actor(TensorDict())
        >>> print(td["action"].shape, bool(td["action"].abs().le(1).all()))
        torch.Size([3]) True
    """

    def __init__(self, action_spec: TensorSpec, action_key: NestedKey = "action") -> None:
        if not isinstance(action_spec, TensorSpec):
            raise TypeError(
                f"RandomPolicy expected a TensorSpec as action_spec, got "
                f"{type(action_spec).__name__}. Pass env.action_spec (or env.full_action_spec)."
            )
        self.action_spec = action_spec.clone()
        self.action_key = action_key
        self._composite = isinstance(self.action_spec, Composite)

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        """Write a random action into ``td`` and return it."""
        if self._composite:
            return td.update(self.action_spec.rand())
        return td.set(self.action_key, self.action_spec.rand())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(action_spec={self.action_spec}, action_key={self.action_key!r})"
