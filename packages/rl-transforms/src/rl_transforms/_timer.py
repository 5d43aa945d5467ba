"""``Timer``: wall-clock time spent in the policy and in the env, per step."""

from __future__ import annotations

import time

import torch
from tensordict import TensorDictBase

from rl_specs import Composite, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg, key_list


class Timer(Transform):
    """A transform that measures the time intervals between `inv` and `call` operations in an environment.

    Writes, after each step, the time spent by the policy (from the end of the previous
    step or reset to the inverse call) and by the step itself, in seconds.

    Args:
        out_keys (sequence of NestedKey, optional): the two entries. Defaults to
            ``["time_policy", "time_step"]``.
        time_key (str, optional): the stem of the default names. Defaults to ``"time"``.

    Raises:
        ValueError: if ``out_keys`` does not hold two keys.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(), Timer())
        >>> data = env.rollout(2)
        >>> bool((data["next", "time_step"] >= 0).all()), data["next", "time_policy"].dtype
        (True, torch.float64)
    """

    def __init__(self, out_keys: KeyArg = None, time_key: str = "time") -> None:
        keys = key_list(out_keys, owner="Timer", name="out_keys") or [
            f"{time_key}_policy",
            f"{time_key}_step",
        ]
        if len(keys) != 2:
            raise ValueError(f"Timer expected two out_keys (policy time, step time), got {keys}.")
        super().__init__()
        self._out_keys = keys
        self.time_key = time_key
        self._last = time.perf_counter()
        self._inv_time = self._last

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for key in self._out_keys:
            tensordict_reset.set(key, self._stamp(tensordict_reset, 0.0))
        self._last = time.perf_counter()
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._inv_time = time.perf_counter()
        return tensordict

    def _has_inverse(self) -> bool:
        return True

    @staticmethod
    def _stamp(tensordict: TensorDictBase, value: float) -> torch.Tensor:
        return torch.full(
            (*tensordict.batch_size, 1), value, dtype=torch.float64, device=tensordict.device
        )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        now = time.perf_counter()
        policy_key, step_key = self._out_keys
        next_tensordict.set(policy_key, self._stamp(next_tensordict, self._inv_time - self._last))
        next_tensordict.set(step_key, self._stamp(next_tensordict, now - self._inv_time))
        self._last = now
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "Timer measures env steps and cannot be applied to stored data. Use it in a TransformedEnv."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        obs = output_spec["full_observation_spec"]
        for key in self._out_keys:
            obs[key] = Unbounded(
                shape=(*output_spec.shape, 1), dtype=torch.float64, device=obs.device
            )
        return output_spec
