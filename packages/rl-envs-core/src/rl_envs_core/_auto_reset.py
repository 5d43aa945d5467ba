"""Auto-resetting environments: the one carry-over engine.

An auto-resetting backend delivers, with a done flag, the first observation of the
next episode. :class:`CarryOverAutoReset` keeps that observation for the next
(partial) reset, which then does not call ``_reset``, and optionally replaces the
delivered ``"next"`` observation by a placeholder (``nan`` for floats).
``EnvBase(auto_reset=True)`` always uses it (whatever else is imported), and
rl-transforms' ``AutoResetTransform`` runs the same engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from tensordict import NestedKey, TensorDictBase

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


def make_auto_reset_handler(replace: bool) -> AutoResetHandler:
    """The handler of a new auto-resetting env."""
    return CarryOverAutoReset(replace=replace)


def _placeholder(
    value: torch.Tensor, fill_float: float, fill_int: int, fill_bool: bool
) -> torch.Tensor:
    if value.dtype == torch.bool:
        return torch.full((), fill_bool, dtype=torch.bool, device=value.device)
    if value.is_floating_point() or value.is_complex():
        return torch.full((), fill_float, dtype=value.dtype, device=value.device)
    return torch.full((), fill_int, dtype=value.dtype, device=value.device)


class CarryOverAutoReset:
    """Carry the post-done observations over to the next reset (the auto-reset engine).

    Args:
        replace (bool, optional): replace the observations delivered with a done flag
            by a placeholder. Defaults to ``True``.
        fill_float (float, optional): placeholder for floating entries. Defaults to ``nan``.
        fill_int (int, optional): placeholder for integer entries. Defaults to ``-1``.
        fill_bool (bool, optional): placeholder for boolean entries. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> carry = CarryOverAutoReset()
        >>> nxt = TensorDict(observation=torch.tensor([[5.0], [7.0]]), done=torch.tensor([[True], [False]]), batch_size=[2])
        >>> carry.carry(nxt, {(): ["done"]}, ["done"])["observation"].squeeze(-1)
        tensor([nan, 7.])
        >>> carry.pop_saved()["observation"].squeeze(-1)
        tensor([5., 7.])
    """

    def __init__(
        self,
        *,
        replace: bool = True,
        fill_float: float = float("nan"),
        fill_int: int = -1,
        fill_bool: bool = False,
    ) -> None:
        self.replace = replace
        self.fill_float = fill_float
        self.fill_int = fill_int
        self.fill_bool = fill_bool
        self.saved: TensorDictBase | None = None

    @staticmethod
    def levels_of(done_keys: Iterable[NestedKey]) -> dict[tuple, list[NestedKey]]:
        """Done keys grouped by nesting level (``()`` is the root)."""
        levels: dict[tuple, list[NestedKey]] = {}
        for key in done_keys:
            levels.setdefault(as_tuple(key)[:-1], []).append(key)
        return levels

    def pop_saved(self) -> TensorDictBase | None:
        """The observations kept for the next reset (``None`` if none); forgets them."""
        saved, self.saved = self.saved, None
        return saved

    def carry(
        self,
        next_tensordict: TensorDictBase,
        done_levels: Mapping[tuple, list[NestedKey]],
        excluded: Iterable[NestedKey],
    ) -> TensorDictBase:
        """Keep what a done step delivered (but ``excluded``: done flags, rewards) for the
        next reset, and put placeholders in its place where done (with ``replace``).

        An entry is masked by the done flags of its own level, or the root's.
        """
        masks = {}
        for level, keys in done_levels.items():
            done = None
            for key in keys:
                value = next_tensordict.get(key, None)
                if value is not None:
                    done = value if done is None else done | value
            if done is not None and bool(done.any()):
                masks[level] = done
        if not masks:
            self.saved = None
            return next_tensordict
        excluded = list(excluded)
        skip = {as_tuple(k) for k in excluded}
        saved = next_tensordict.exclude(*excluded).clone()
        self.saved = saved
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
            fill = _placeholder(value, self.fill_float, self.fill_int, self.fill_bool)
            next_tensordict.set(key, torch.where(fit_mask(mask, value.shape, key), fill, value))
        return next_tensordict

    def on_step(self, env: EnvBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """:meth:`carry` with ``env``'s done levels, its done and reward entries excluded."""
        cache = env._key_cache()
        return self.carry(
            next_tensordict, cache["done_levels"], (*cache["done_keys"], *cache["reward_keys"])
        )

    def on_reset(self, env: EnvBase, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """The kept observations, with cleared done flags, for a reset after a done step."""
        saved = self.pop_saved()
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
