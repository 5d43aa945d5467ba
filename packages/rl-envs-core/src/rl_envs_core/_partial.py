"""Partial steps (``"_step"``) and partial resets (``"_reset"``).

A boolean mask says which elements run; the other elements keep the previous
content of the input tensordict (or zeros for a step when there is none). Reset
masks live at each done level; a root ``"_reset"`` overrides the nested ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from tensordict.utils import is_non_tensor

from rl_envs_core._step_mdp import as_tuple
from rl_envs_core._td import entries, get_entry, set_validated

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase

Level = tuple[str, ...]


def fit_mask(mask: torch.Tensor, shape: torch.Size, key: NestedKey) -> torch.Tensor:
    """Reshape ``mask`` so that it broadcasts against an entry of ``shape``.

    The mask covers the leading dims of the entry, possibly with one trailing
    singleton (a ``"_reset"`` shaped like ``"done"``, ``(*batch, 1)``).

    Raises:
        ValueError: if the mask cannot be aligned with the entry.
    """
    mshape = mask.shape
    if tuple(shape[: len(mshape)]) != tuple(mshape):
        if mshape and mshape[-1] == 1 and tuple(shape[: len(mshape) - 1]) == tuple(mshape[:-1]):
            mask = mask.squeeze(-1)
            mshape = mask.shape
        else:
            raise ValueError(
                f"The mask of shape {tuple(mshape)} cannot be aligned with the entry "
                f"{key!r} of shape {tuple(shape)}: the mask must match the leading dims "
                f"of the entry. Shape '_reset'/'_step' like the batch (or like 'done')."
            )
    return mask.reshape(torch.Size([*mshape, *([1] * (len(shape) - len(mshape)))]))


def merge_masked(
    new: TensorDictBase,
    previous: TensorDictBase | None,
    mask_for: dict[Level, torch.Tensor],
    *,
    zeros_when_missing: bool,
) -> TensorDictBase:
    """Write ``where(mask, new, previous)`` into ``new`` for every leaf with a mask.

    Args:
        new: the freshly computed content (edited in place and returned).
        previous: where the non-selected values come from.
        mask_for: level -> mask; a leaf uses the mask of its deepest enclosing
            level, and the root level ``()`` overrides every other level.
        zeros_when_missing: fill non-selected values with zeros when ``previous``
            lacks the entry (partial steps); otherwise keep ``new``'s values.
    """
    root = mask_for.get(())
    fitted: dict[tuple[int, torch.Size], torch.Tensor] = {}  # entries mostly share shapes
    if (
        root is not None
        and type(new) is TensorDict
        and (previous is None or type(previous) is TensorDict)
    ):
        # one mask for every leaf of plain tensordicts: walk their leaf dicts directly
        plain: list[tuple[TensorDict, str, torch.Tensor]] = []
        if _plain_updates(new, previous, root, fitted, zeros_when_missing, (), plain):
            for td, key, value in plain:  # same shape, dtype and device as the value replaced
                if isinstance(value, torch.Tensor):
                    set_validated(td, key, value)
                else:  # non-tensor data: the public set labels it with td's device
                    td.set(key, value)
            return new
    updates = []
    for key, value in new.items(True, True, is_leaf=_is_leaf):
        non_tensor = is_non_tensor(value)
        if not non_tensor and not isinstance(value, torch.Tensor):
            continue
        tup = as_tuple(key)
        mask = root
        if mask is None:
            for depth in range(len(tup) - 1, 0, -1):
                mask = mask_for.get(tup[:depth])
                if mask is not None:
                    break
        if mask is None:
            continue
        old = previous.get(key, None) if previous is not None else None
        if non_tensor:
            merged = _masked_non_tensor(value, old, mask)
        else:
            merged = _masked(value, old, mask, fitted, zeros_when_missing, key)
        if merged is not None:
            updates.append((key, merged))
    for key, value in updates:
        new.set(key, value)
    return new


def _masked(
    value: torch.Tensor,
    old: torch.Tensor | None,
    mask: torch.Tensor,
    fitted: dict[tuple[int, torch.Size], torch.Tensor],
    zeros_when_missing: bool,
    key: NestedKey,
) -> torch.Tensor | None:
    """``where(mask, value, old)`` for one leaf; ``None`` when ``value`` stays as it is."""
    if old is None or old.shape != value.shape:
        if not zeros_when_missing:
            return None
        old = torch.zeros_like(value)
    where = fitted.get((id(mask), value.shape))
    if where is None:
        where = fitted[(id(mask), value.shape)] = fit_mask(mask, value.shape, key)
    return torch.where(where, value, old)


def _is_leaf(cls: type) -> bool:
    """Tensors and non-tensor data are the leaves a masked merge visits."""
    return not issubclass(cls, TensorDictBase) or issubclass(cls, (NonTensorData, NonTensorStack))


def _masked_non_tensor(
    value: TensorDictBase, old: TensorDictBase | None, mask: torch.Tensor
) -> TensorDictBase | None:
    """``where(mask, value, old)`` for non-tensor data (strings...), element by element.

    ``None`` (``value`` stays) without previous data of the same batch size: there is
    no "zero" string to fall back on.
    """
    if old is None or not is_non_tensor(old) or old.batch_size != value.batch_size:
        return None
    shape = value.batch_size
    if not shape or mask.numel() != shape.numel():
        return None  # an unbatched value is stepped or skipped as a whole elsewhere
    keep = mask.reshape(shape).tolist()
    return NonTensorStack.from_list(_pick(keep, value.tolist(), old.tolist()))


def _pick(keep: list, new: list, old: list) -> list:
    """Nested lists: ``new``'s item where ``keep`` is true, ``old``'s elsewhere."""
    return [
        _pick(k, n, o) if isinstance(k, list) else (n if k else o)
        for k, n, o in zip(keep, new, old)
    ]


def _plain_updates(
    new: TensorDict,
    previous: TensorDict | None,
    mask: torch.Tensor,
    fitted: dict[tuple[int, torch.Size], torch.Tensor],
    zeros_when_missing: bool,
    prefix: tuple[str, ...],
    updates: list[tuple[TensorDict, str, torch.Tensor]],
) -> bool:
    """The writes of ``merge_masked`` with one mask over plain tensordicts, into ``updates``.

    ``False`` (nothing written yet) when a level is a lazy stack or a tensorclass: the
    caller takes the generic walk.
    """
    old_entries = entries(previous) if previous is not None else {}
    for key, value in entries(new).items():
        old = old_entries.get(key)
        if type(value) is TensorDict:
            sub_old = old if type(old) is TensorDict else None
            args = (mask, fitted, zeros_when_missing, (*prefix, key), updates)
            if not _plain_updates(value, sub_old, *args):
                return False
        elif isinstance(value, TensorDictBase):
            if not is_non_tensor(value):
                return False
            merged = _masked_non_tensor(value, old, mask)
            if merged is not None:
                updates.append((new, key, merged))
        elif isinstance(value, torch.Tensor):
            old = old if isinstance(old, torch.Tensor) else None
            merged = _masked(value, old, mask, fitted, zeros_when_missing, (*prefix, key))
            if merged is not None:
                updates.append((new, key, merged))
    return True


def collect_resets(
    tensordict: TensorDictBase, reset_keys: list[NestedKey]
) -> dict[Level, torch.Tensor]:
    """The ``"_reset"`` masks present in ``tensordict``, by level (root included)."""
    found: dict[Level, torch.Tensor] = {}
    root = get_entry(tensordict, "_reset")
    if root is not None:
        found[()] = root
    for key in reset_keys:
        if key == "_reset":
            continue
        value = get_entry(tensordict, key)
        if value is not None:
            found[as_tuple(key)[:-1]] = value
    return found


def remove_resets(td: TensorDictBase, levels: dict[Level, torch.Tensor]) -> None:
    """Delete the ``"_reset"`` entries of ``levels`` from ``td`` in place."""
    for level in levels:
        key = (*level, "_reset") if level else "_reset"
        if get_entry(td, key) is not None:
            td.del_(key)


def batch_mask(mask: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
    """Reduce a ``"_step"`` mask to exactly ``batch_size`` (dropping a trailing 1)."""
    if mask.shape == batch_size:
        return mask
    if mask.numel() == batch_size.numel():
        return mask.reshape(batch_size)
    raise ValueError(
        f"The '_step' mask must have the batch shape {tuple(batch_size)} (or "
        f"{(*batch_size, 1)}), got {tuple(mask.shape)}. Build it from the done flags: "
        f"td['_step'] = ~td['done'].squeeze(-1)."
    )


def skipped_step(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """The ``"next"`` content of a step that runs nowhere: previous values or zeros."""
    shape = tensordict.batch_size if not env.batch_locked else env.batch_size
    extra = shape[: len(shape) - len(env.batch_size)]  # leading dims of an unlocked env
    out = TensorDict(batch_size=shape, device=env.device)
    cache = env._key_cache()
    for role in ("observation", "reward", "done"):
        for key, leaf in cache[f"{role}_leaves"]:
            old = tensordict.get(key, None)
            if old is None:
                old = leaf.zero(extra) if extra else leaf.zero()
            out.set(key, old.clone() if isinstance(old, torch.Tensor) else old)
    return out


def partial_step(env: EnvBase, tensordict: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
    """Run ``env``'s step where ``mask`` is ``True`` and merge with the previous values."""
    batch = tensordict.batch_size
    if not batch:
        if bool(mask.any()):
            return env._step_and_complete(tensordict)
        return skipped_step(env, tensordict)
    mask = batch_mask(mask, batch)
    if not bool(mask.any()):
        return skipped_step(env, tensordict)
    if env.batch_locked:
        out = env._step_and_complete(tensordict)
        return merge_masked(out, tensordict, {(): mask}, zeros_when_missing=True)
    stepped = env._step_and_complete(tensordict[mask])
    out = TensorDict(batch_size=batch, device=stepped.device)
    for key, value in stepped.items(True, True):
        old = tensordict.get(key, None)
        full_shape = (*batch, *value.shape[1:])
        if isinstance(old, torch.Tensor) and old.shape == full_shape:
            full = old.clone()
        else:
            full = torch.zeros(full_shape, dtype=value.dtype, device=value.device)
        full[mask] = value
        out.set(key, full)
    return out
