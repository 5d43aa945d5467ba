"""``ModelBasedEnvBase``: an environment whose dynamics are a learned world model."""

from __future__ import annotations

import abc
import warnings
from collections.abc import Mapping

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_envs_core._env_base import EnvBase

__all__ = ["ModelBasedEnvBase"]


class ModelBasedEnvBase(EnvBase):
    """Basic environment for Model Based RL sota-implementations.

    The environment gives the interface of a classical environment to a world model
    (an ``nn.Module`` reading and writing tensordicts): each :meth:`step` calls the
    world model on a shallow copy of the input and keeps the entries that the output
    specs declare (observations, reward, done flags). Subclasses set the specs (by
    hand or with :meth:`set_specs_from_env`) and implement :meth:`_reset`.

    The environment is batch-unlocked: the world model runs on whatever batch it is
    given.

    Args:
        world_model (nn.Module): model that generates the next world state and its
            reward from the current state and action.
        params (mapping of str to Tensor, optional): parameters to run the world model
            with instead of its own (a ``TensorDict.from_module`` or a
            ``named_parameters`` dict), e.g. for ensembles or meta-learning. Defaults
            to ``None`` (the model's own parameters).
        buffers (mapping of str to Tensor, optional): buffers to run the world model
            with, like ``params``. Defaults to ``None``.
        device (torch.device, optional): where the model and the data live. Defaults
            to ``"cpu"``.
        batch_size (torch.Size, optional): the batch of imagined environments.
            Defaults to ``None`` (empty).
        run_type_checks (bool, optional): check every step against the specs.
            Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> from rl_specs import Composite, Unbounded
        >>> class MyMBEnv(ModelBasedEnvBase):
        ...     def __init__(self, world_model, device="cpu", batch_size=None):
        ...         super().__init__(world_model, device=device, batch_size=batch_size)
        ...         self.observation_spec = Composite(hidden_observation=Unbounded((4,)))
        ...         self.state_spec = Composite(hidden_observation=Unbounded((4,)))
        ...         self.action_spec = Unbounded((1,))
        ...         self.reward_spec = Unbounded((1,))
        ...
        ...     def _reset(self, tensordict):
        ...         td = TensorDict(batch_size=self.batch_size, device=self.device)
        ...         return td.update(self.state_spec.rand())
        >>> world_model = TensorDictSequential(
        ...     TensorDictModule(lambda obs, act: obs + act, in_keys=["hidden_observation", "action"],
        ...                      out_keys=["hidden_observation"]),
        ...     TensorDictModule(torch.nn.Linear(4, 1), in_keys=["hidden_observation"],
        ...                      out_keys=["reward"]),
        ... )
        >>> env = MyMBEnv(world_model)
        >>> print(env.rollout(max_steps=10).shape)
        torch.Size([10])
    """

    batch_locked = False

    def __init__(
        self,
        world_model: nn.Module,
        params: Mapping[str, torch.Tensor] | None = None,
        buffers: Mapping[str, torch.Tensor] | None = None,
        device: torch.device | str | int | None = "cpu",
        batch_size: torch.Size | None = None,
        run_type_checks: bool = False,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size, run_type_checks=run_type_checks)
        if not isinstance(world_model, nn.Module):
            raise TypeError(
                f"{type(self).__name__} expected world_model to be an nn.Module, got "
                f"{type(world_model).__name__}. Wrap the callable in a TensorDictModule."
            )
        self.world_model = world_model.to(self.device) if self.device is not None else world_model
        self.world_model_params = params
        self.world_model_buffers = buffers
        self._functional_state = {**_flat_state(params), **_flat_state(buffers)}

    def set_specs_from_env(self, env: EnvBase) -> None:
        """Copy the observation, reward, action, done and state specs of ``env``."""
        device = self.device
        self.observation_spec = env.observation_spec.clone().to(device)
        self.reward_spec = env.reward_spec.clone().to(device)
        self.action_spec = env.action_spec.clone().to(device)
        self.done_spec = env.done_spec.clone().to(device)
        self.state_spec = env.state_spec.clone().to(device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        # the input must stay untouched: the model writes into a shallow copy
        tensordict_out = tensordict.copy()
        if self._functional_state:
            tensordict_out = torch.func.functional_call(
                self.world_model, self._functional_state, (tensordict_out,), strict=False
            )
        else:
            tensordict_out = self.world_model(tensordict_out)
        # missing done flags are filled with False by EnvBase.step
        return tensordict_out.select(
            *self.observation_spec.keys(True, True),
            *self.full_done_spec.keys(True, True),
            *self.full_reward_spec.keys(True, True),
            strict=False,
        )

    @abc.abstractmethod
    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        """Return the first (imagined) state; each subclass decides where it comes from."""
        raise NotImplementedError

    def _set_seed(self, seed: int | None) -> None:
        warnings.warn(
            f"{type(self).__name__}.set_seed does nothing: a model-based env has no "
            f"random generator of its own. Seed torch (torch.manual_seed) instead.",
            UserWarning,
            stacklevel=2,
        )


def _flat_state(state: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """Turn params/buffers (a TensorDict or a dict) into ``{"dotted.name": tensor}``."""
    if state is None:
        return {}
    if isinstance(state, TensorDictBase):
        return dict(state.flatten_keys(".").items())
    return dict(state)
