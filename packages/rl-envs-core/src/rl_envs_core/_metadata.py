"""``EnvMetaData``: what a batched env needs to know about an env without building it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDictBase

from rl_specs import Composite

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase


class EnvMetaData:
    """A class for environment meta-data storage and passing in multiprocessed settings.

    It holds the specs, a zero-filled TED ``tensordict`` with every declared entry,
    the batch size, device and ``batch_locked`` flag of an env, so that buffers can
    be allocated without building the env.

    Args:
        tensordict (TensorDictBase): zero-filled data, as ``env.fake_tensordict()``.
        specs (Composite): ``Composite(output_spec=..., input_spec=...)``.
        batch_size (torch.Size): the env's batch size.
        env_str (str): a description of the env (its ``repr``).
        device (torch.device): the env's device.
        batch_locked (bool): whether inputs must have the env's batch size.
        device_map (dict, optional): key -> device of each entry of ``tensordict``.
            Defaults to ``None`` (computed from ``tensordict``).

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> meta = EnvMetaData.metadata_from_env(CountingEnv())
        >>> meta.batch_size, meta.batch_locked
        (torch.Size([]), True)
        >>> meta.expand(4).tensordict["next", "observation"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        *,
        tensordict: TensorDictBase,
        specs: Composite,
        batch_size: torch.Size,
        env_str: str,
        device: torch.device | None,
        batch_locked: bool,
        device_map: dict | None = None,
    ) -> None:
        self.tensordict = tensordict
        self.specs = specs
        self.batch_size = torch.Size(batch_size)
        self.env_str = env_str
        self.device = device
        self.batch_locked = batch_locked
        if device_map is None:
            device_map = {key: value.device for key, value in tensordict.items(True, True)}
        self.device_map = device_map

    @staticmethod
    def metadata_from_env(env: EnvBase) -> EnvMetaData:
        """Read the metadata of a built env (specs and zero data are copied)."""
        return EnvMetaData(
            tensordict=env.fake_tensordict().clone(),
            specs=env.specs.clone(),
            batch_size=env.batch_size,
            env_str=str(env),
            device=env.device,
            batch_locked=env.batch_locked,
        )

    @property
    def output_spec(self) -> Composite:
        """The env's ``output_spec``."""
        return self.specs["output_spec"]

    @property
    def input_spec(self) -> Composite:
        """The env's ``input_spec``."""
        return self.specs["input_spec"]

    def expand(self, *size: int | Sequence[int]) -> EnvMetaData:
        """Metadata of ``size`` copies of the env: ``size`` replaces the batch size.

        Raises:
            ValueError: if ``size`` does not end with the current batch size.
        """
        if len(size) == 1 and not isinstance(size[0], int):
            size = tuple(size[0])
        size = torch.Size(size)
        if tuple(size[len(size) - len(self.batch_size) :]) != tuple(self.batch_size):
            raise ValueError(
                f"EnvMetaData.expand expected a size ending with the batch size "
                f"{tuple(self.batch_size)}, got {tuple(size)}. Prepend the new dims."
            )
        return EnvMetaData(
            tensordict=self.tensordict.expand(size).clone(),
            specs=self.specs.expand(size),
            batch_size=size,
            env_str=self.env_str,
            device=self.device,
            batch_locked=self.batch_locked,
            device_map=dict(self.device_map),
        )

    def clone(self) -> EnvMetaData:
        """A deep copy."""
        return EnvMetaData(
            tensordict=self.tensordict.clone(),
            specs=self.specs.clone(),
            batch_size=self.batch_size,
            env_str=self.env_str,
            device=self.device,
            batch_locked=self.batch_locked,
            device_map=dict(self.device_map),
        )

    def to(self, device: torch.device | str) -> EnvMetaData:
        """A copy whose data and specs live on ``device``."""
        device = torch.device(device)
        return EnvMetaData(
            tensordict=self.tensordict.to(device),
            specs=self.specs.to(device),
            batch_size=self.batch_size,
            env_str=self.env_str,
            device=device,
            batch_locked=self.batch_locked,
            device_map={key: device for key in self.device_map},
        )

    def __repr__(self) -> str:
        return (
            f"EnvMetaData(env_str={self.env_str!r}, batch_size={tuple(self.batch_size)}, "
            f"device={self.device}, batch_locked={self.batch_locked})"
        )
