"""Auto-resetting environments: :class:`AutoResetTransform` and :class:`AutoResetEnv`.

An auto-resetting env returns, with a done flag, the first observation of the next
episode. The transform keeps that observation for the next reset (which then does
not reset the base env) and, with ``replace``, puts placeholders in its place in
``"next"`` so that no data of the next episode leaks into the finished one. The
work is done by rl-envs-core's engine (``CarryOverAutoReset``), the one
``EnvBase(auto_reset=True)`` uses too.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.extension import CarryOverAutoReset
from rl_specs import Composite
from rl_transforms._base import Transform
from rl_transforms._compose import Compose
from rl_transforms._env import TransformedEnv

#: what the transform reads before it knows its env's specs
_ROOT_DONE = {(): ["done"]}
_SKIPPED = ["done", "terminated", "truncated", "reward"]


class AutoResetTransform(Transform):
    """A transform for auto-resetting environments.

    Use it as the first transform of an :class:`AutoResetEnv`.

    Keyword Args:
        replace (bool, optional): replace the observations delivered with a done flag by
            placeholders. Defaults to ``True``.
        fill_float (float or str, optional): placeholder of floating entries.
            Defaults to ``"nan"``.
        fill_int (int, optional): placeholder of integer entries. Defaults to ``-1``.
        fill_bool (bool, optional): placeholder of boolean entries. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = AutoResetTransform()
        >>> nxt = TensorDict({"observation": torch.tensor([[5.0], [7.0]]), "done": torch.tensor([[True], [False]])}, [2])
        >>> t._step(TensorDict({}, [2]), nxt)["observation"].squeeze(-1)
        tensor([nan, 7.])
        >>> t.saved["observation"].squeeze(-1)
        tensor([5., 7.])
    """

    def __init__(
        self,
        *,
        replace: bool | None = None,
        fill_float: float | str = "nan",
        fill_int: int = -1,
        fill_bool: bool = False,
    ) -> None:
        super().__init__()
        self._carry = CarryOverAutoReset(
            replace=True if replace is None else replace,
            fill_float=float(fill_float),
            fill_int=fill_int,
            fill_bool=fill_bool,
        )

    replace = property(
        lambda self: self._carry.replace,
        lambda self, value: setattr(self._carry, "replace", value),
        doc="Whether the observations delivered with a done flag are replaced.",
    )
    fill_float = property(
        lambda self: self._carry.fill_float,
        lambda self, value: setattr(self._carry, "fill_float", float(value)),
        doc="The placeholder of floating entries.",
    )
    fill_int = property(
        lambda self: self._carry.fill_int,
        lambda self, value: setattr(self._carry, "fill_int", value),
        doc="The placeholder of integer entries.",
    )
    fill_bool = property(
        lambda self: self._carry.fill_bool,
        lambda self, value: setattr(self._carry, "fill_bool", value),
        doc="The placeholder of boolean entries.",
    )
    saved = property(
        lambda self: self._carry.saved,
        lambda self, value: setattr(self._carry, "saved", value),
        doc="The observations kept for the next reset (``None`` if there are none).",
    )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        lazy = self._lazy
        levels = lazy.get("done_levels", _ROOT_DONE)
        return self._carry.carry(next_tensordict, levels, lazy.get("skipped", _SKIPPED))

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def pop_saved(self) -> TensorDictBase | None:
        """The observations kept for the next reset (``None`` if there are none); forgets them."""
        return self._carry.pop_saved()

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done_keys = list(output_spec["full_done_spec"].keys(True, True))
        self._lazy["done_levels"] = CarryOverAutoReset.levels_of(done_keys)
        self._lazy["skipped"] = [*done_keys, *output_spec["full_reward_spec"].keys(True, True)]
        return output_spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "AutoResetTransform handles the resets of an environment and cannot be applied to "
            "stored data. Use it in an AutoResetEnv."
        )


class AutoResetEnv(TransformedEnv):
    """A subclass for auto-resetting envs.

    A reset that follows a done step returns the observations kept by its
    :class:`AutoResetTransform` instead of resetting the base env.

    Args:
        base_env (EnvBase): an env that resets itself when done.
        transform (AutoResetTransform or Compose, optional): the transforms, an
            :class:`AutoResetTransform` first. Defaults to ``AutoResetTransform()``.
        **kwargs: passed to :class:`TransformedEnv`.

    Raises:
        TypeError: if the first transform is not an :class:`AutoResetTransform`.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = AutoResetEnv(CountingEnv(max_steps=2))
        >>> isinstance(env.transform, AutoResetTransform)
        True
    """

    def __init__(
        self, base_env: EnvBase, transform: Transform | None = None, **kwargs: bool
    ) -> None:
        transform = transform if transform is not None else AutoResetTransform()
        first = transform[0] if isinstance(transform, Compose) and len(transform) else transform
        if not isinstance(first, AutoResetTransform):
            raise TypeError(
                f"AutoResetEnv expected an AutoResetTransform as first transform, got "
                f"{type(first).__name__}. Pass Compose(AutoResetTransform(), ...)."
            )
        kwargs.setdefault("auto_unwrap", False)
        super().__init__(base_env, transform, **kwargs)

    def _auto_reset_transform(self) -> AutoResetTransform:
        transform = self.transform
        return transform[0] if isinstance(transform, Compose) else transform

    def _reset(
        self, tensordict: TensorDictBase | None = None, **kwargs: Any
    ) -> TensorDictBase:  # Any: backend kwargs
        saved = self._auto_reset_transform().pop_saved()
        if saved is None or tensordict is None:
            return super()._reset(tensordict, **kwargs)
        for key in self.done_keys:
            saved.set(
                key,
                torch.zeros(self.full_done_spec[key].shape, dtype=torch.bool, device=saved.device),
            )
        return self.transform._reset(tensordict, saved)
