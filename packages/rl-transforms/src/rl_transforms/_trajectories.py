"""Trajectory identifiers: :class:`TrajCounter`."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_specs import Composite, Unbounded
from rl_transforms._base import Transform


class TrajCounter(Transform):
    """Global trajectory counter transform.

    Every reset gives each reset env a new trajectory number (``0, 1, 2, ...``); steps
    keep it. The counter is a shared-memory buffer: clones (and workers receiving a
    clone) draw from the same counter, so no two trajectories share a number.

    Args:
        out_key (NestedKey, optional): the counter entry. Defaults to ``"traj_count"``.

    Keyword Args:
        repeats (int, optional): accepted for compatibility with TorchRL's signature;
            every reset draws a new number. Defaults to ``None``.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=2), TrajCounter())
        >>> env.rollout(6, break_when_any_done=False)["next", "traj_count"].squeeze(-1)
        tensor([0, 0, 1, 1, 2, 2])
    """

    def __init__(self, out_key: NestedKey = "traj_count", *, repeats: int | None = None) -> None:
        super().__init__()
        self._out_keys = [out_key]
        self.out_key = out_key
        self.repeats = repeats
        self.register_buffer("_counter", torch.zeros((), dtype=torch.int64).share_memory_())

    def _draw(self, count: int) -> torch.Tensor:
        counter = self._buffers["_counter"]
        start = int(counter)
        counter.add_(count)
        return torch.arange(start, start + count, dtype=torch.int64)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        batch = tensordict_reset.batch_size
        shape = (*batch, 1)
        mask = tensordict.get("_reset", None)
        previous = tensordict.get(self.out_key, None)
        if mask is None or previous is None or previous.shape != torch.Size(shape):
            ids = self._draw(batch.numel()).reshape(*batch, *(1,) * (len(shape) - len(batch)))
            value = ids.expand(shape).clone()
        else:
            flags = mask.reshape(*batch, -1).any(-1)
            value = previous.clone()
            value[flags] = (
                self._draw(int(flags.sum()))
                .reshape(-1, *(1,) * (len(shape) - len(batch)))
                .expand(value[flags].shape)
            )
        tensordict_reset.set(self.out_key, value.to(tensordict_reset.device))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        value = tensordict.get(self.out_key, None)
        if value is None:
            raise KeyError(
                f"TrajCounter expected {self.out_key!r} in the step input (written at reset). "
                f"Reset the env first and keep {self.out_key!r} in the data."
            )
        next_tensordict.set(self.out_key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "TrajCounter numbers trajectories as an environment resets and cannot be applied to "
            "stored data. Use it in a TransformedEnv."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        shape = (*output_spec.shape, 1)
        obs = output_spec["full_observation_spec"]
        obs[self.out_key] = Unbounded(shape=shape, dtype=torch.int64, device=obs.device)
        self._carry_as_state(obs, [self.out_key])
        return output_spec
