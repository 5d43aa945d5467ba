"""Stacking the sub-envs of a batched env: their specs, checks and shared buffers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rl_batched_envs._env_group import BufferLayout
from rl_envs_core import EnvBase, EnvMetaData
from rl_envs_core.extension import new_unchecked
from rl_specs import Composite, NonTensor, contains_lazy_spec

EnvFactory = Callable[..., EnvBase]


class _CountMismatchError(ValueError, RuntimeError):
    """A per-worker list of the wrong length: a bad value (``ValueError``) that TorchRL
    code catches as the ``RuntimeError`` it raises there."""


class OptionConflictError(ValueError, RuntimeError):
    """Constructor options that cannot go together: a bad value (``ValueError``) that
    TorchRL code catches as the ``RuntimeError`` it raises there."""


def non_tensor_keys(specs: Composite) -> list[str]:
    """The non-tensor leaves (strings, objects) of the stacked specs, as strings."""
    return [
        str(key)
        for key, leaf in specs.items(include_nested=True, leaves_only=True)
        if isinstance(leaf, NonTensor)
    ]


def as_list(value: Any, n: int, name: str, kind: type | tuple) -> list:  # Any: one or many
    if isinstance(value, (kind, str)) or not isinstance(value, Sequence):
        return [value] * n
    if len(value) != n:
        raise _CountMismatchError(
            f"len({name}) and num_workers mismatch: {name} must be a single item or a "
            f"sequence of num_workers={n} items, got {len(value)} items. Pass one per env "
            f"or a single one for all."
        )
    return list(value)


def stack_specs(metas: Sequence[EnvMetaData]) -> tuple[Composite, bool]:
    """The sub-envs' specs stacked along a new first dim, and whether the stack is lazy."""
    first = metas[0].specs
    if all(m.specs == first for m in metas[1:]):
        specs = first.expand(len(metas), *first.shape).clone()
    else:
        specs = torch.stack([m.specs for m in metas], 0)
    return specs, contains_lazy_spec(specs)


def check_sub_batch(owner: str, metas: Sequence[EnvMetaData]) -> torch.Size:
    """The sub-envs' common batch size.

    Raises:
        ValueError: the sub-envs have different batch sizes.
    """
    sub_batch = metas[0].batch_size
    for i, meta in enumerate(metas):
        if meta.batch_size != sub_batch:
            raise ValueError(
                f"{owner} needs sub-envs with one batch size: env 0 has "
                f"{tuple(sub_batch)}, env {i} has {tuple(meta.batch_size)}. Build every "
                f"env with the same batch_size."
            )
    return sub_batch


def clone_entries(
    buf: TensorDictBase, entries: list[tuple[str, torch.Tensor]] | None
) -> TensorDictBase:
    """``buf.clone()``, from the entries :func:`flat_entries` listed (``None``: clone).

    ``clone()`` walks and re-validates every entry at each call; the buffers' entries
    never change, so the copy is one ``Tensor.clone`` per entry in a new tensordict.
    """
    if entries is None:
        return buf.clone()
    return new_unchecked({key: value.clone() for key, value in entries}, buf.batch_size, buf.device)


def _last(key: NestedKey) -> str:
    return key if isinstance(key, str) else key[-1]


def make_buffers(
    specs: Composite,
    cache: Mapping[str, Any],  # Any: layout values
    batch: torch.Size,
) -> tuple[BufferLayout, TensorDictBase, TensorDictBase, TensorDictBase]:
    """The key layout and the zeroed input, step-output and root buffers of a batch
    whose stacked specs are ``specs`` (``cache``: its ``key_layout``)."""
    out, inp = specs["output_spec"], specs["input_spec"]
    obs = out["full_observation_spec"].zero()
    done = out["full_done_spec"].zero()
    state = inp["full_state_spec"].zero()
    in_buf = inp["full_action_spec"].zero()
    in_buf.update(state)
    in_buf.set("_step", torch.zeros(batch, dtype=torch.bool))
    for level, keys in cache["done_levels"].items():
        shape = done.get(keys[0]).shape
        in_buf.set((*level, "_reset"), torch.zeros(shape, dtype=torch.bool))
    next_buf = obs.clone()
    next_buf.update(out["full_reward_spec"].zero())
    next_buf.update(done.clone())
    root_buf = obs.clone()
    root_buf.update(done.clone())
    root_buf.update(state.clone())
    layout = BufferLayout(
        in_keys=[*cache["action_keys"], *cache["state_keys"]],
        mask_keys=["_step", *cache["reset_keys"]],
        next_keys=[*cache["observation_keys"], *cache["reward_keys"], *cache["done_keys"]],
        root_keys=[*cache["observation_keys"], *cache["done_keys"], *cache["state_keys"]],
        optional_keys=cache["state_keys"],
        previous_keys=cache["observation_keys"],
        reset_levels=[
            (
                (*level, "_reset") if level else "_reset",
                next((k for k in keys if _last(k) == "done"), keys[0]),
            )
            for level, keys in cache["done_levels"].items()
        ],
    )
    return layout, in_buf, next_buf, root_buf
