"""Dreamer's imagination environment (``DreamerEnv``) and its decoding transform."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn

from rl_envs_core._env_base import EnvBase
from rl_envs_core._native._model_based import ModelBasedEnvBase
from rl_specs import Composite, TensorSpec, Unbounded

__all__ = ["DreamerDecoder", "DreamerEnv"]


class DreamerEnv(ModelBasedEnvBase):
    """Dreamer simulation environment.

    Imagines trajectories in the latent space of a Dreamer world model: the
    ``"state"`` (stochastic prior, shape ``prior_shape``) and ``"belief"``
    (deterministic recurrent state, shape ``belief_shape``) are advanced by
    ``world_model`` (typically the RSSM prior followed by the reward model), which
    reads them with the ``"action"`` and writes the next ``"state"``, ``"belief"``
    and ``"reward"``.

    The observation and state specs default to unbounded ``"state"`` and
    ``"belief"`` entries of the given shapes; set the action spec (or call
    :meth:`set_specs_from_env` with the real, transformed environment).
    :meth:`reset` on a tensordict (the posterior states of real data) starts the
    imagination from it; without one it samples the state specs.

    Args:
        world_model (TensorDictModule): the latent dynamics and reward model.
        prior_shape (tuple of int): the shape of the stochastic ``"state"``.
        belief_shape (tuple of int): the shape of the deterministic ``"belief"``.
        obs_decoder (TensorDictModule, optional): decodes latents into observations
            (used by :meth:`decode_obs` and :class:`DreamerDecoder`). Defaults to ``None``.
        device (torch.device, optional): where the model and data live. Defaults to ``"cpu"``.
        batch_size (torch.Size, optional): the batch of imagined trajectories.
            Defaults to ``None`` (empty).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_specs import Bounded
        >>> prior = TensorDictModule(
        ...     lambda state, belief, action: (state.tanh() + action, belief + 1, belief[..., :1]),
        ...     in_keys=["state", "belief", "action"], out_keys=["state", "belief", "reward"])
        >>> env = DreamerEnv(prior, prior_shape=(2,), belief_shape=(3,), batch_size=[4])
        >>> env.action_spec = Bounded(-1, 1, shape=(4, 2))
        >>> start = TensorDict(state=torch.zeros(4, 2), belief=torch.zeros(4, 3), batch_size=[4])
        >>> traj = env.rollout(5, tensordict=env.reset(start))
        >>> print(traj.shape, traj["next", "belief"][0, -1].tolist())
        torch.Size([4, 5]) [5.0, 5.0, 5.0]
    """

    def __init__(
        self,
        world_model: TensorDictModule,
        prior_shape: tuple[int, ...],
        belief_shape: tuple[int, ...],
        obs_decoder: TensorDictModule | None = None,
        device: torch.device | str | int | None = "cpu",
        batch_size: torch.Size | None = None,
    ) -> None:
        super().__init__(world_model, device=device, batch_size=batch_size)
        self.obs_decoder = obs_decoder
        self.prior_shape = tuple(prior_shape)
        self.belief_shape = tuple(belief_shape)
        batch = tuple(self.batch_size)
        latents = Composite(
            state=Unbounded(shape=(*batch, *self.prior_shape), device=self.device),
            belief=Unbounded(shape=(*batch, *self.belief_shape), device=self.device),
            shape=batch,
            device=self.device,
        )
        self.observation_spec = latents
        self.state_spec = latents.clone()

    def set_specs_from_env(self, env: EnvBase) -> None:
        """Copy the specs of ``env``, whose observations hold ``"state"`` and ``"belief"``.

        Raises:
            KeyError: if ``env.observation_spec`` lacks ``"state"`` or ``"belief"``.
        """
        missing = [k for k in ("state", "belief") if k not in env.observation_spec.keys()]
        if missing:
            raise KeyError(
                f"DreamerEnv.set_specs_from_env expected 'state' and 'belief' in the "
                f"observation spec of {type(env).__name__}, missing {missing} (present: "
                f"{sorted(map(str, env.observation_spec.keys()))}). Append the Dreamer "
                f"encoder/RSSM-posterior transforms to that env first."
            )
        super().set_specs_from_env(env)
        self.state_spec = Composite(
            state=self.observation_spec["state"].clone(),
            belief=self.observation_spec["belief"].clone(),
            shape=env.batch_size,
            device=self.device,
        )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        if tensordict is not None and "state" in tensordict.keys():
            return tensordict.exclude("_reset").clone()
        td = self.state_spec.rand()
        td.update(self.observation_spec.rand())
        return td

    def decode_obs(self, tensordict: TensorDictBase, compute_latents: bool = False) -> TensorDictBase:
        """Decode the latents of ``tensordict`` into observations with ``obs_decoder``.

        Args:
            tensordict (TensorDictBase): data holding ``"state"`` and ``"belief"``.
            compute_latents (bool, optional): run the world model first. Defaults to ``False``.

        Raises:
            ValueError: if the environment has no ``obs_decoder``.
        """
        if self.obs_decoder is None:
            raise ValueError(
                "DreamerEnv.decode_obs needs an observation decoder, got obs_decoder=None. "
                "Build the env with DreamerEnv(..., obs_decoder=decoder)."
            )
        if compute_latents:
            tensordict = self.world_model(tensordict)
        return self.obs_decoder(tensordict)


class DreamerDecoder(nn.Module):
    """A transform to record the decoded observations in Dreamer.

    After each step and reset of its parent environment, the transform runs the
    ``obs_decoder`` of the underlying :class:`DreamerEnv` on the outgoing data, so
    an imagined rollout carries the decoded observations (for logging). Specs pass
    through unchanged.

    ``parent`` is the environment the transform is attached to; a transform
    container (``TransformedEnv``) sets it through :meth:`set_container`, and the
    decoder is looked up on ``parent.base_env`` when the parent is itself a
    wrapper. It can also be set directly.

    Raises:
        RuntimeError: when called before it is attached to an environment, or when
            that environment has no ``obs_decoder``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> decoder = TensorDictModule(lambda s: s * 2, in_keys=["state"], out_keys=["pixels"])
        >>> env = DreamerEnv(TensorDictModule(lambda s: s, in_keys=["state"], out_keys=["state"]),
        ...                  prior_shape=(2,), belief_shape=(1,), obs_decoder=decoder)
        >>> record = DreamerDecoder()
        >>> record.set_container(env)
        >>> print(record(TensorDict(state=torch.ones(2)))["pixels"])
        tensor([2., 2.])
    """

    def __init__(self) -> None:
        super().__init__()
        self.parent: Any = None  # Any: an env, or a transform container exposing base_env

    def set_container(self, container: Any) -> None:  # Any: see ``parent``
        """Attach the transform to ``container`` (an environment or a wrapper of one)."""
        # a back-reference, not a child: registering it as a submodule would make a cycle
        object.__setattr__(self, "parent", container)

    def _decoder(self) -> nn.Module:
        env = getattr(self.parent, "base_env", self.parent)
        decoder = getattr(env, "obs_decoder", None)
        if decoder is None:
            raise RuntimeError(
                f"DreamerDecoder needs a parent DreamerEnv with an obs_decoder, got parent="
                f"{type(env).__name__}. Append it to a DreamerEnv built with obs_decoder=..., "
                f"or call set_container(env) first."
            )
        return decoder

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._decoder()(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Decode the observations of ``tensordict`` (in place) and return it."""
        return self._call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        """Return ``observation_spec`` unchanged: decoded frames are for logging only."""
        return observation_spec
