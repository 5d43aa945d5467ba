"""Auto-resetting environments: :class:`AutoResetTransform` and :class:`AutoResetEnv`.

An auto-resetting env returns, with a done flag, the first observation of the next
episode. The transform keeps that observation for the next reset (which then does
not reset the base env) and, with ``replace``, puts placeholders in its place in
``"next"`` so that no data of the next episode leaks into the finished one.

Importing this module registers :class:`TransformAutoResetHandler` with
``rl_envs_core.extension``, so that ``EnvBase(auto_reset=True)`` runs the same logic.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.extension import register_auto_reset_handler
from rl_specs import Composite
from rl_transforms._base import Compose, Transform
from rl_transforms._env import TransformedEnv


def _fill(value: torch.Tensor, fill_float: float, fill_int: int, fill_bool: bool) -> torch.Tensor:
    if value.dtype == torch.bool:
        return torch.full((), fill_bool, dtype=torch.bool, device=value.device)
    if value.is_floating_point() or value.is_complex():
        return torch.full((), fill_float, dtype=value.dtype, device=value.device)
    return torch.full((), fill_int, dtype=value.dtype, device=value.device)


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
        self.replace = True if replace is None else replace
        self.fill_float = float(fill_float)
        self.fill_int = fill_int
        self.fill_bool = fill_bool
        self.saved: TensorDictBase | None = None

    def _done_keys(self) -> list[NestedKey]:
        return self._lazy.get("done_keys", ["done"])

    def _skipped(self) -> set:
        return self._lazy.get("skipped", {"done", "terminated", "truncated", "reward"})

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = None
        for key in self._done_keys():
            value = next_tensordict.get(key, None)
            if value is not None:
                done = value if done is None else done | value
        if done is None or not bool(done.any()):
            self.saved = None
            return next_tensordict
        skipped = self._skipped()
        self.saved = next_tensordict.exclude(*skipped).clone()
        if not self.replace:
            return next_tensordict
        mask = done.reshape(*next_tensordict.batch_size, -1).any(-1)
        for key, value in list(next_tensordict.items(True, True)):
            if key in skipped or not isinstance(value, torch.Tensor):
                continue
            fill = _fill(value, self.fill_float, self.fill_int, self.fill_bool)
            m = mask.reshape(*mask.shape, *(1,) * (value.ndim - mask.ndim))
            next_tensordict.set(key, torch.where(m, fill, value))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def pop_saved(self) -> TensorDictBase | None:
        """The observations kept for the next reset (``None`` if there are none); forgets them."""
        saved, self.saved = self.saved, None
        return saved

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done_keys = list(output_spec["full_done_spec"].keys(True, True))
        self._lazy["done_keys"] = done_keys
        self._lazy["skipped"] = {*done_keys, *output_spec["full_reward_spec"].keys(True, True)}
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


class TransformAutoResetHandler:
    """The ``rl_envs_core`` auto-reset handler backed by an :class:`AutoResetTransform`.

    ``EnvBase(auto_reset=True)`` builds one per env (through the registry of
    ``rl_envs_core.extension``): steps go through the transform, and a reset after a done
    step returns the kept observations instead of calling ``_reset``.

    Keyword Args:
        replace (bool, optional): see :class:`AutoResetTransform`. Defaults to ``True``.

    Examples:
        >>> from rl_envs_core.extension import AutoResetHandler
        >>> isinstance(TransformAutoResetHandler(replace=True), AutoResetHandler)
        True
    """

    def __init__(self, *, replace: bool = True) -> None:
        self.transform = AutoResetTransform(replace=replace)

    def on_step(self, env: EnvBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        lazy = self.transform._lazy
        if "done_keys" not in lazy:
            lazy["done_keys"] = list(env.done_keys)
            lazy["skipped"] = {*env.done_keys, *env.reward_keys}
        return self.transform._step(next_tensordict, next_tensordict)

    def on_reset(self, env: EnvBase, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        saved = self.transform.pop_saved()
        if saved is None or tensordict is None:
            return None
        spec = env.full_done_spec
        for key in env.done_keys:
            saved.set(key, spec[key].zero())
        return saved


register_auto_reset_handler(TransformAutoResetHandler)
