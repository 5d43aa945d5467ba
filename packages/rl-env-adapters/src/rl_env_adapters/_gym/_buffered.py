"""``GymStepper``: a single gym env stepped straight into a batch's preallocated tensors.

The ``buffered_stepper`` hook of :class:`~rl_env_adapters.GymWrapper` (see
``rl_envs_core.extension.SupportsBufferedSteps``). The batch's actions are
converted to what gym takes once, for all steps (the same converter as the
per-step path, applied to the whole block); each step writes gym's observation,
reward and flags into numpy views of the batch's ``"next"`` tensors: no tensor and
no tensordict per step. The env is reset (as ``GymWrapper``'s ``_reset`` does, no
seed) as soon as an episode ends. The values are those ``GymWrapper.step`` gives (same casts:
numpy assignment rounds like ``Tensor.to``).

Only the plain case is handled: an unbatched env with one ``Box`` observation, one
action leaf, ``frame_skip=1``, no info reader, on the cpu, and none of the step
methods overridden by a subclass. Anything else declines (``None``) and the caller
takes the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_envs_core.extension import steps_checked
from rl_specs import Composite, MultiOneHot, NonTensor, OneHot

if TYPE_CHECKING:
    from rl_env_adapters._gym._wrapper import GymWrapper

__all__ = ["GymStepper", "gym_stepper"]

#: methods of the step/reset template a subclass may override: then it declines.
_TEMPLATE = (
    "step",
    "next_of",
    "reset",
    "_step",
    "_reset",
    "_read_step",
    "_build_output",
    "_select_action",
    "read_action",
    "read_obs",
    "read_reward",
    "read_done",
    "read_info",
    "_skip_frames",
    "_output_transform",
    "_reset_output_transform",
)


def _plain(env: GymWrapper, base: type) -> bool:
    cls = type(env)
    return all(getattr(cls, name) is getattr(base, name) for name in _TEMPLATE)


def gym_stepper(env: GymWrapper, base: type, batch: TensorDictBase) -> GymStepper | None:
    """A :class:`GymStepper` for ``env`` and ``batch``, or ``None`` when ``env`` is not plain."""
    if (
        not steps_checked(env)  # the first step goes through env.step's checks
        or env._batched
        or env.wrapper_frame_skip != 1
        or env.info_dict_reader
        or not env._convert_actions_to_numpy
        or env.auto_reset_handler is not None
        or (env.device is not None and env.device.type != "cpu")
        or env._action_key_cached != "action"
        or not _plain(env, base)
    ):
        return None
    obs_spec = env.full_observation_spec
    if list(obs_spec.keys()) != ["observation"]:
        return None
    leaf = obs_spec["observation"]
    if isinstance(leaf, (Composite, NonTensor, OneHot, MultiOneHot)):
        return None
    space = env._env.observation_space
    if type(space).__name__ != "Box":
        return None
    action = env.full_action_spec["action"]
    if isinstance(action, (Composite, NonTensor)):
        return None
    if type(env._env.action_space).__name__ == "Tuple":
        return None
    if list(env.full_reward_spec.keys()) != ["reward"]:
        return None
    return GymStepper(env, batch)


class GymStepper:
    """Steps a plain single gym env for one batch (see the module docstring).

    Args:
        env (GymWrapper): the env (checked plain by :func:`gym_stepper`).
        batch (TensorDictBase): ``[T]`` batch with the actions written.
    """

    def __init__(self, env: GymWrapper, batch: TensorDictBase) -> None:
        self._write_action = env._write_action
        self._action = batch.get("action")  # read when the steps run: fill or step
        nxt = batch.get("next")
        self._obs = nxt.get("observation").numpy()
        self._reward = nxt.get("reward").numpy().reshape(len(self._obs), -1)
        self._flags = [
            nxt.get(key).numpy().reshape(len(self._obs))
            for key in ("terminated", "truncated", "done")
        ]
        self._step = env._env.step
        self._reset = env._env.reset
        self._normalise = env._output_transform
        self._normalise_reset = env._reset_output_transform
        self._shape = self._obs.shape[1:]

    def fill(self, reset_last: bool = True) -> tuple | None:
        """Step the env once per action, writing each step; reset it when it finishes."""
        actions = self._write_action(self._action)  # the whole block at once
        actions = actions if isinstance(actions, np.ndarray) else np.asarray(actions)
        last = len(self._obs) - 1
        steps, firsts = [], []
        for t, action in enumerate(actions):
            first = self._one(t, action, reset_last or t < last)
            if first is not None:
                steps.append(t)
                firsts.append(first)
        if not steps:
            return None
        return torch.tensor(steps), None, {"observation": torch.from_numpy(np.stack(firsts))}

    def step(self, t: int) -> tuple | None:
        """Step once with the action at ``t``; write step ``t``; reset if the episode ended.

        The per-step mode (``BufferedStepper.step``): the action is read now, so a
        policy may write it just before. Returns the reset made, as :meth:`fill` does.
        """
        action = self._write_action(self._action[t])
        first = self._one(t, action, True)
        if first is None:
            return None
        return (
            torch.tensor([t]),
            None,
            {"observation": torch.from_numpy(first).unsqueeze(0)},
        )

    def _one(self, t: int, action: np.ndarray, may_reset: bool) -> np.ndarray | None:
        """Step ``t``: write it; the first observation of a new episode if it reset."""
        out, rewards, shape = self._obs, self._reward, self._shape
        te, tr, dn = self._flags
        obs, reward, terminated, truncated, done, _ = self._normalise(self._step(action))
        if done is not None:  # a legacy 4-value step: done alone, read as terminated
            terminated, truncated = done, False
        terminated, truncated = bool(terminated), bool(truncated)
        try:
            out[t] = obs
        except ValueError:
            out[t] = np.asarray(obs).reshape(shape)
        try:
            rewards[t] = reward
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"The gym env's step returned reward={reward!r} ({type(reward).__name__}); "
                f"an unbatched env's 'reward' must be one number (float or numpy scalar), "
                f"stored with shape (1,). Return a scalar reward from step(), or wrap the "
                f"env with a gymnasium.Wrapper that does."
            ) from err
        ended = terminated or truncated
        te[t], tr[t], dn[t] = terminated, truncated, ended
        if ended and may_reset:
            first, _ = self._normalise_reset(self._reset())
            return np.asarray(first).reshape(shape)
        return None
