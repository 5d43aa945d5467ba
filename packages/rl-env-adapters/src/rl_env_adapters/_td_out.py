"""``OutputBuilder``: the TensorDict of a step or reset, from the adapters' compiled readers."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from rl_envs_core.extension import new_unchecked
from rl_specs import Composite, NonTensor

__all__ = ["OutputBuilder"]


class OutputBuilder:
    """Builds output TensorDicts, skipping TensorDict's checks where they cannot fail.

    The adapters' readers are compiled once for the observation spec and a device:
    on the cpu they give tensors led by the batch dims, and the adapters build the
    reward and done flags the same way, so ``new_unchecked`` (no per-entry check)
    gives the same result as ``TensorDict(...)``. Anything else (string
    observations, another device, an env moved since) goes through ``TensorDict``.

    Args:
        observation_spec (Composite): the observations the readers produce.
        device (torch.device, optional): the device the readers were compiled for.

    Examples:
        >>> import torch
        >>> from rl_specs import Composite, Unbounded
        >>> build = OutputBuilder(Composite(obs=Unbounded(shape=(2, 3)), shape=(2,)), None)
        >>> build({"obs": torch.zeros(2, 3)}, torch.Size([2]), None).batch_size
        torch.Size([2])
    """

    def __init__(self, observation_spec: Composite, device: torch.device | None) -> None:
        self.device = device
        self.tensors_only = not any(
            isinstance(leaf, NonTensor) for leaf in observation_spec.values(True, True)
        )
        self.trusted = self.tensors_only and (device is None or device.type == "cpu")
        # sub-dicts in the sources (a Dict space's nested observations) become
        # tensordicts; without them the source is taken as it is (no per-entry look)
        self.nested = any(isinstance(spec, Composite) for spec in observation_spec.values())

    def __call__(
        self,
        source: dict[str, Any],  # Any: tensors, or nested dicts of them
        batch_size: torch.Size,
        device: torch.device | None,
    ) -> TensorDict:
        """The TensorDict of ``source`` on ``device`` (the env's current one)."""
        if self.trusted and device is self.device:
            return new_unchecked(source, batch_size, device, nested=self.nested)
        return TensorDict(source, batch_size=batch_size, device=device)
