"""Auto-resetting environments: ``EnvBase(auto_reset=True)``.

An auto-resetting backend delivers, with a done flag, the first observation of the
next episode. The handler keeps that observation for the next (partial) reset,
which then does not call ``_reset``, and optionally replaces the delivered
``"next"`` observation by a placeholder (``nan`` for floats).

The handler is chosen through a tiny registry so that a higher package
(``rl-transforms``'s ``AutoResetTransform``) can plug its own implementation in
with :func:`register_auto_reset_handler`; the default below needs nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from tensordict import TensorDictBase

from rl_envs_core._partial import fit_mask
from rl_envs_core._step_mdp import as_tuple

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase


@runtime_checkable
class AutoResetHandler(Protocol):
    """What ``EnvBase`` calls on an auto-resetting env.

    ``on_step`` receives the ``"next"`` content of every step and returns it
    (possibly edited); ``on_reset`` returns the reset content to use instead of
    calling ``_reset`` (or ``None`` to call ``_reset`` as usual).
    """

    def on_step(self, env: EnvBase, next_tensordict: TensorDictBase) -> TensorDictBase: ...

    def on_reset(
        self, env: EnvBase, tensordict: TensorDictBase | None
    ) -> TensorDictBase | None: ...


HandlerFactory = Callable[..., AutoResetHandler]
_FACTORIES: list[HandlerFactory] = []


def register_auto_reset_handler(factory: HandlerFactory) -> None:
    """Make ``factory(replace=...)`` build the handler of every new auto-resetting env.

    The latest registration wins. ``rl-transforms`` calls this at import time of its
    auto-reset module to route ``EnvBase(auto_reset=True)`` through its transform.

    Raises:
        TypeError: if ``factory`` is not callable.
    """
    if not callable(factory):
        raise TypeError(
            f"register_auto_reset_handler expected a callable returning an "
            f"AutoResetHandler, got {type(factory).__name__}."
        )
    _FACTORIES.append(factory)


def make_auto_reset_handler(replace: bool) -> AutoResetHandler:
    """The handler for a new env: the last registered factory, else the built-in one."""
    factory = _FACTORIES[-1] if _FACTORIES else CarryOverAutoReset
    return factory(replace=replace)


def _placeholder(value: torch.Tensor, fill_float: float, fill_int: int) -> torch.Tensor:
    if value.dtype == torch.bool:
        return torch.zeros((), dtype=torch.bool, device=value.device)
    if value.is_floating_point() or value.is_complex():
        return torch.full((), fill_float, dtype=value.dtype, device=value.device)
    return torch.full((), fill_int, dtype=value.dtype, device=value.device)


class CarryOverAutoReset:
    """Built-in handler: carry the post-done observations over to the next reset.

    Args:
        replace (bool, optional): replace the observations delivered with a done flag
            by a placeholder. Defaults to ``True``.
        fill_float (float, optional): placeholder for floating entries. Defaults to ``nan``.
        fill_int (int, optional): placeholder for integer entries (booleans get
            ``False``). Defaults to ``-1``.
    """

    def __init__(
        self, *, replace: bool = True, fill_float: float = float("nan"), fill_int: int = -1
    ) -> None:
        self.replace = replace
        self.fill_float = fill_float
        self.fill_int = fill_int
        self._saved: TensorDictBase | None = None

    def on_step(self, env: EnvBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        cache = env._key_cache()
        masks = {}
        for level, keys in cache["done_levels"].items():
            done = None
            for key in keys:
                value = next_tensordict.get(key, None)
                if value is not None:
                    done = value if done is None else done | value
            if done is not None and bool(done.any()):
                masks[level] = done
        if not masks:
            self._saved = None
            return next_tensordict
        skip = {as_tuple(k) for k in (*cache["done_keys"], *cache["reward_keys"])}
        saved = next_tensordict.exclude(*cache["done_keys"], *cache["reward_keys"]).clone()
        self._saved = saved
        if not self.replace:
            return next_tensordict
        root = masks.get(())
        for key, value in saved.items(True, True):
            tup = as_tuple(key)
            if tup in skip or not isinstance(value, torch.Tensor):
                continue
            mask = root
            for depth in range(len(tup) - 1, 0, -1):
                if mask is not None:
                    break
                mask = masks.get(tup[:depth])
            if mask is None:
                continue
            fill = _placeholder(value, self.fill_float, self.fill_int)
            next_tensordict.set(key, torch.where(fit_mask(mask, value.shape, key), fill, value))
        return next_tensordict

    def on_reset(self, env: EnvBase, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        saved, self._saved = self._saved, None
        if saved is None or tensordict is None:
            return None
        for key, spec_leaf in env._done_leaf_specs():
            saved.set(
                key,
                torch.zeros(
                    saved.batch_size + spec_leaf.shape[len(env.batch_size) :],
                    dtype=spec_leaf.dtype,
                    device=saved.device,
                ),
            )
        return saved
