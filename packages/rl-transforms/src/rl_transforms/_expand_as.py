"""The :class:`ExpandAs` transform: broadcast one entry to the shape of another."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Composite, TensorSpec
from rl_transforms._base import Transform
from rl_transforms._key_lists import missing_key_error, spec_get, writable

_ROLES = ("full_observation_spec", "full_done_spec", "full_reward_spec")


class ExpandAs(Transform):
    """Expands an entry to the shape of a reference entry.

    Trailing singleton dims are added to the entry until it has as many dims as the
    reference, then it is expanded (as :meth:`torch.Tensor.expand_as`). Typical use:
    broadcast an env-level done flag of shape ``[*batch, 1]`` to every agent's
    observation shape. The result is declared as an observation.

    Args:
        in_key (NestedKey): the entry expanded.
        ref_key (NestedKey): the entry whose shape is copied.
        out_key (NestedKey, optional): where the expanded entry goes. Defaults to ``in_key``.

    Raises:
        KeyError: if ``in_key`` or ``ref_key`` is missing from the data or the specs.
        RuntimeError: if the entry cannot be broadcast to the reference shape.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ExpandAs(in_key="done", ref_key=("agents", "obs"), out_key="done_all")
        >>> td = TensorDict({"done": torch.tensor([[True], [False]]),
        ...                  ("agents", "obs"): torch.zeros(2, 3, 4)}, [2])
        >>> t(td)["done_all"].shape
        torch.Size([2, 3, 4])
    """

    def __init__(
        self, in_key: NestedKey, ref_key: NestedKey, out_key: NestedKey | None = None
    ) -> None:
        super().__init__([in_key], [out_key if out_key is not None else in_key])
        self.ref_key = unravel_key(ref_key)

    @property
    def in_key(self) -> NestedKey:
        """The entry expanded."""
        return self._in_keys[0]

    @property
    def out_key(self) -> NestedKey:
        """Where the expanded entry is written."""
        return self._out_keys[0]

    @staticmethod
    def _expand(value: torch.Tensor, ref_shape: torch.Size) -> torch.Tensor:
        while value.ndim < len(ref_shape):
            value = value.unsqueeze(-1)
        return value.expand(ref_shape)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        value = read(next_tensordict, self.in_key)
        ref = read(next_tensordict, self.ref_key)
        if value is None or ref is None:
            if self._missing_tolerance:
                return next_tensordict
            missing, role = (self.in_key, "in_keys") if value is None else (self.ref_key, "ref_key")
            raise missing_key_error("ExpandAs", missing, next_tensordict, role)
        write(next_tensordict, self.out_key, self._expand(value, ref.shape))
        return next_tensordict

    def _find_spec(self, output_spec: Composite, key: NestedKey) -> tuple[str, TensorSpec]:
        for role in _ROLES:
            found = spec_get(output_spec[role], key)
            if found is not None:
                return role, found
        raise KeyError(
            f"ExpandAs expected {key!r} among the env's observation, done or reward specs, "
            f"got none. Name an entry the env declares."
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec = writable(output_spec)
        role, spec = self._find_spec(output_spec, self.in_key)
        _, ref = self._find_spec(output_spec, self.ref_key)
        new = spec.clone()
        while new.ndim < ref.ndim:
            new = new.unsqueeze(-1)
        new = new.expand(ref.shape)
        target = role if self.out_key == self.in_key else "full_observation_spec"
        output_spec[target][self.out_key] = new
        return output_spec

    def __repr__(self) -> str:
        return (
            f"ExpandAs(in_key={self.in_key!r}, ref_key={self.ref_key!r}, out_key={self.out_key!r})"
        )
