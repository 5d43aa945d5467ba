"""``VecGymEnvTransform``: TED-consistent data from batched envs that reset themselves.

Vector envs that reset a finished sub-env inside ``step`` (gymnasium's SAME_STEP
mode, SB3 ``VecEnv``) return the *first* observation of the new episode where the
*last* one of the finished episode belongs, and report the last one separately.
``GymWrapper`` already reads gymnasium's ``info["final_obs"]`` itself; this transform
does the same job for any batched env that writes those terminal observations under
an entry (``final_name``) of its step output.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase

from rl_specs import Composite
from rl_transforms import Transform

__all__ = ["VecGymEnvTransform"]


class VecGymEnvTransform(Transform):
    """A transform for GymWrapper subclasses that handles the auto-reset in a consistent way.

    On a step where some envs are done, the observations in ``"next"`` are replaced by
    the terminal ones found under ``final_name`` (entries absent there are filled with
    ``missing_obs_value``), and the first observations of the new episodes are kept.
    The next (partial) reset of exactly those envs hands the kept observations out.
    The ``final_name`` entry is consumed: it leaves the output and the observation spec.

    Args:
        final_name (str, optional): the entry holding the terminal observations (a
            tensordict with the same observation keys). Defaults to ``"final_info"``.
        missing_obs_value (float, optional): value of a terminal observation the env
            did not report. Defaults to ``nan``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecGymEnvTransform()
        >>> out = TensorDict(
        ...     observation=torch.tensor([[0.0], [5.0]]),  # env 0 was reset inside step
        ...     done=torch.tensor([[True], [False]]),
        ...     final_info=TensorDict(observation=torch.tensor([[9.0], [0.0]]), batch_size=[2]),
        ...     batch_size=[2],
        ... )
        >>> t._step(TensorDict(batch_size=[2]), out)["observation"].squeeze(-1)
        tensor([9., 5.])
        >>> reset = TensorDict(observation=torch.zeros(2, 1), batch_size=[2])
        >>> t._reset(TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2]), reset)[
        ...     "observation"
        ... ].squeeze(-1)
        tensor([0., 0.])
    """

    def __init__(self, final_name: str = "final_info", missing_obs_value: float = math.nan) -> None:
        super().__init__()
        self.final_name = final_name
        self.missing_obs_value = missing_obs_value
        self._kept: tuple[torch.Tensor, TensorDictBase] | None = None

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        final = next_tensordict.get(self.final_name, None)
        if final is None:
            return next_tensordict
        next_tensordict = next_tensordict.exclude(self.final_name)
        done = next_tensordict.get("done")
        mask = done.reshape(done.shape[: next_tensordict.batch_dims])
        if not bool(mask.any()):
            self._kept = None
            return next_tensordict
        keys = [k for k in final.keys(True, True) if k in next_tensordict.keys(True, True)]
        keys += [
            k
            for k in next_tensordict.keys(True, True)
            if k not in keys and k not in ("done", "terminated", "truncated", "reward")
        ]
        self._kept = (mask.clone(), next_tensordict.select(*keys).clone())
        for key in keys:
            value = next_tensordict.get(key)
            last = final.get(key, None)
            if last is None:
                last = torch.full_like(value, self.missing_obs_value)
            m = mask.reshape(mask.shape + (1,) * (value.ndim - mask.ndim))
            next_tensordict.set(key, torch.where(m, last.to(value.dtype), value))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        kept, self._kept = self._kept, None
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if kept is None or reset is None:
            return tensordict_reset
        mask, values = kept
        if not torch.equal(reset.reshape(mask.shape), mask):
            return tensordict_reset
        for key in values.keys(True, True):
            value = values.get(key)
            m = mask.reshape(mask.shape + (1,) * (value.ndim - mask.ndim))
            current = tensordict_reset.get(key, None)
            tensordict_reset.set(key, value if current is None else torch.where(m, value, current))
        return tensordict_reset

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        """Drop the consumed ``final_name`` entry from the observation spec."""
        if self.final_name in observation_spec.keys():
            observation_spec = observation_spec.clone()
            del observation_spec[self.final_name]
        return observation_spec
