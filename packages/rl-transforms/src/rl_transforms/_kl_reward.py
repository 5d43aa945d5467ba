"""``KLRewardTransform``: penalise the reward by the KL between an actor and its start.

The reference policy ``pi_0`` is the actor as it was when the transform was built
(a frozen copy of its parameters); the current policy is the live actor. With the
action ``a`` sampled from the current policy, ``log pi(a|s) - log pi_0(a|s)`` is an
unbiased estimate of ``KL[pi || pi_0]``, and the reward becomes
``reward - coef * kl``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase, TensorDictParams

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Composite
from rl_transforms._base import Transform
from rl_transforms._key_lists import key_list


def _to_reward_shape(value: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """Sum the trailing dims of a per-dim log-prob so that it matches ``reward``."""
    if value.shape == reward.shape:
        return value
    lead = reward.dim() - 1 if reward.shape[-1:] == (1,) else reward.dim()
    if value.dim() > lead:
        value = value.reshape(*value.shape[:lead], -1).sum(-1)
    return value.reshape(reward.shape)


class KLRewardTransform(Transform):
    """A transform to add a :math:`KL[\\pi_{current}||\\pi_0]` correction term to the reward.

    Keeps the fine-tuned ``actor`` close to where it started: at every step the
    reward at ``in_keys`` becomes ``reward - coef * (log pi(a|s) - log pi_0(a|s))``,
    written at ``out_keys``. ``pi_0`` is a frozen copy of the actor's parameters taken
    at construction. The current log-prob is read at the actor's ``log_prob_key``
    (written when the actor sampled the action), or computed with the live actor.

    Args:
        actor (TensorDictModuleBase): a probabilistic tensordict module
            (``ProbabilisticTensorDictModule`` / ``ProbabilisticTensorDictSequential``)
            with ``get_dist`` and an ``out_key`` (or ``action_key``) holding the action.
        coef (float, optional): the weight of the KL term. Defaults to ``1.0``.
        in_keys (NestedKey or sequence of NestedKey, optional): the reward read.
            Defaults to ``["reward"]``.
        out_keys (NestedKey or sequence of NestedKey, optional): where the corrected
            reward is written. Defaults to ``in_keys``.
        requires_grad (bool, optional): make the reference parameters trainable
            ``nn.Parameter`` copies (in ``frozen_params``) and let gradients flow
            through the KL term; else frozen buffers and a detached KL. Defaults to
            ``False``.

    Keyword Args:
        log_prob_key (NestedKey, optional): where the actor wrote the log-prob of the
            action. Defaults to the actor's ``log_prob_key`` (``"action_log_prob"``).
        action_key (NestedKey, optional): the action entry. Defaults to the actor's
            first ``dist_sample_keys`` entry (else its last ``out_key``).

    Raises:
        TypeError: if ``actor`` is not a tensordict module with ``get_dist``.
        ValueError: if more than one reward key is given.
        KeyError: at step time, if the action or the reward is missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (NormalParamExtractor, ProbabilisticTensorDictModule,
        ...     ProbabilisticTensorDictSequential, TensorDictModule)
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
        ...     ["observation"], ["loc", "scale"])
        >>> actor = ProbabilisticTensorDictSequential(net, ProbabilisticTensorDictModule(
        ...     ["loc", "scale"], ["action"], distribution_class=torch.distributions.Normal,
        ...     return_log_prob=True))
        >>> t = KLRewardTransform(actor, coef=0.5)
        >>> td = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
        >>> td["next"] = TensorDict(reward=torch.ones(4, 1), batch_size=[4])
        >>> t(td)["next", "reward"].squeeze(-1)  # the actor has not moved: no penalty
        tensor([1., 1., 1., 1.])
        >>> with torch.no_grad():
        ...     _ = net.module[0].bias.add_(1.0)
        >>> td = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
        >>> td["next"] = TensorDict(reward=torch.ones(4, 1), batch_size=[4])
        >>> bool((t(td)["next", "reward"] != 1).all())
        True
    """

    def __init__(
        self,
        actor: TensorDictModuleBase,
        coef: float = 1.0,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
        *,
        log_prob_key: NestedKey | None = None,
        action_key: NestedKey | None = None,
    ) -> None:
        if not isinstance(actor, TensorDictModuleBase) or not hasattr(actor, "get_dist"):
            raise TypeError(
                f"KLRewardTransform expected a probabilistic tensordict module (with get_dist), "
                f"got {type(actor).__name__}. Build the actor with tensordict.nn's "
                f"ProbabilisticTensorDictSequential."
            )
        in_keys = key_list(
            ["reward"] if in_keys is None else in_keys, owner="KLRewardTransform", name="in_keys"
        )
        if len(in_keys) != 1:
            raise ValueError(
                f"KLRewardTransform expected a single reward key, got in_keys={in_keys}. "
                f"Use one transform per reward entry."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.__dict__["actor"] = actor  # the live policy: not a submodule (not saved twice)
        frozen = TensorDict.from_module(actor).detach().clone()
        # parameters (trainable) when requires_grad, else buffers: both follow .to()
        self.frozen_params = TensorDictParams(frozen, no_convert=not requires_grad)
        self.requires_grad = requires_grad
        self.register_buffer("coef", torch.as_tensor(float(coef)))
        self.log_prob_key = log_prob_key or getattr(actor, "log_prob_key", "action_log_prob")
        if action_key is None:
            samples = list(getattr(actor, "dist_sample_keys", None) or [])
            action_key = samples[0] if samples else actor.out_keys[-1]
        self.action_key = action_key

    # ------------------------------------------------------------------ KL
    def _log_prob(
        self, tensordict: TensorDictBase, action: torch.Tensor, *, reference: bool
    ) -> torch.Tensor:
        data = tensordict.select(*self.actor.in_keys, strict=False).copy()
        if reference:
            with self.frozen_params.to_module(self.actor):
                dist = self.actor.get_dist(data)
        else:
            dist = self.actor.get_dist(data)
        return dist.log_prob(action)

    def _penalised(self, tensordict: TensorDictBase, reward: torch.Tensor) -> torch.Tensor:
        action = read(tensordict, self.action_key)
        if action is None:
            raise KeyError(
                f"KLRewardTransform expected the action at {self.action_key!r} in the step "
                f"input, found none. Available keys: "
                f"{sorted(map(str, tensordict.keys(True, True)))}. Pass action_key= naming it."
            )
        with torch.set_grad_enabled(self.requires_grad):
            current = read(tensordict, self.log_prob_key)
            if current is None:
                current = self._log_prob(tensordict, action, reference=False)
            reference = self._log_prob(tensordict, action, reference=True)
        kl = _to_reward_shape(current, reward) - _to_reward_shape(reference, reward)
        if not self.requires_grad:
            kl = kl.detach()
        return reward - self.coef.to(reward.dtype) * kl

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        reward = read(next_tensordict, self.in_keys[0])
        if reward is None:
            raise KeyError(
                f"KLRewardTransform expected a reward at {self.in_keys[0]!r} after the step, "
                f"found none. Available keys: "
                f"{sorted(map(str, next_tensordict.keys(True, True)))}."
            )
        write(next_tensordict, self.out_keys[0], self._penalised(tensordict, reward))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Penalise ``("next", reward)`` of stored transitions (a TED tensordict)."""
        nxt = tensordict.get("next", None)
        if nxt is None:
            raise KeyError(
                "KLRewardTransform applied to data expected a 'next' entry holding the reward "
                f"(a TED tensordict), got keys {sorted(map(str, tensordict.keys()))}."
            )
        self._step(tensordict, nxt)
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "KLRewardTransform needs the action of the step; call it on a TED tensordict "
            "(with 'next') or use it in a TransformedEnv."
        )

    # ------------------------------------------------------------------ specs
    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        in_key, out_key = self.in_keys[0], self.out_keys[0]
        if out_key != in_key and reward_spec.get(in_key) is not None:
            reward_spec[out_key] = reward_spec[in_key].clone()
        return reward_spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"KLRewardTransform(coef={float(self.coef)}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )
