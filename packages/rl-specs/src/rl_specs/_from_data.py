"""Specs built from data: :func:`make_composite_from_td`."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDictBase,
    is_non_tensor,
    is_tensor_collection,
)

from ._composite import Composite
from ._non_tensor import NonTensor
from ._unbounded import Unbounded


def make_composite_from_td(
    data: TensorDictBase,
    *,
    unsqueeze_null_shapes: bool = True,
    dynamic_shape: bool = False,
) -> Composite:
    """Creates a Composite instance from a tensordict, assuming all values are unbounded.

    Every tensor becomes an :class:`Unbounded` spec of its shape, dtype and device,
    every nested tensordict a nested :class:`Composite` of its batch size, and every
    non-tensor entry a :class:`NonTensor` spec holding the value as example.

    Args:
        data (TensorDictBase): the data to describe.

    Keyword Args:
        unsqueeze_null_shapes (bool, optional): give entries of shape ``()`` the shape
            ``(1,)``. Defaults to ``True``.
        dynamic_shape (bool, optional): give every tensor a dynamic (``-1``) last dim
            (when it has dims beyond the batch dims); in a lazy stack, the dims whose
            size differs between the stacked elements are dynamic too. Defaults to
            ``False``.

    Raises:
        TypeError: if ``data`` is not a tensor collection.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict(
        ...     {"obs": torch.zeros(4, 3), "next": {"reward": torch.zeros(4, 1)},
        ...      "step": torch.tensor(0)},
        ...     batch_size=[],
        ... )
        >>> spec = make_composite_from_td(data)
        >>> spec["obs"].shape, spec["next", "reward"].dtype, spec["step"].shape
        (torch.Size([4, 3]), torch.float32, torch.Size([1]))
        >>> spec.is_in(data.set("step", torch.tensor([0])))
        True
    """
    if not is_tensor_collection(data):
        raise TypeError(
            f"make_composite_from_td expected a TensorDict, got {type(data).__name__}. "
            "Wrap the data with TensorDict(data, batch_size=...)."
        )
    kwargs = {"unsqueeze_null_shapes": unsqueeze_null_shapes, "dynamic_shape": dynamic_shape}
    lazy = dynamic_shape and isinstance(data, LazyStackedTensorDict)
    entries = {}
    for key in data.keys():
        value = _first_member(data, key) if lazy else data.get(key)
        if is_non_tensor(value):
            example = value.data if isinstance(value, NonTensorData) else value.tolist()
            entries[key] = NonTensor(shape=value.shape, device=value.device, example_data=example)
            if lazy:
                member = entries[key].unsqueeze(data.stack_dim)
                entries[key] = member.expand(data.batch_size)
        elif is_tensor_collection(value):
            if lazy:
                value = LazyStackedTensorDict.lazy_stack(
                    [td.get(key) for td in data.tensordicts], data.stack_dim
                )
            entries[key] = make_composite_from_td(value, **kwargs)
        else:
            shape = _dynamic_shape(data, key) if lazy else value.shape
            if dynamic_shape and len(shape) > data.batch_dims:
                shape = torch.Size((*shape[:-1], -1))
            if not shape and unsqueeze_null_shapes:
                shape = torch.Size((1,))
            entries[key] = Unbounded(shape=shape, dtype=value.dtype, device=value.device)
    return Composite(entries, shape=data.batch_size, device=data.device)


def _first_member(data: LazyStackedTensorDict, key: str) -> Any:  # Any: a tensor or collection
    return data.tensordicts[0].get(key)


def _dynamic_shape(data: LazyStackedTensorDict, key: str) -> torch.Size:
    """Shape of ``data[key]`` over a lazy stack, with -1 where the elements disagree."""
    shapes = [td.get(key).shape for td in data.tensordicts]
    if len({len(s) for s in shapes}) != 1:
        raise ValueError(
            f"make_composite_from_td(dynamic_shape=True) expected entry {key!r} to have the "
            f"same number of dims in every stacked element, got shapes {shapes}. "
            "Pad the entries to one rank."
        )
    merged = [d if all(s[i] == d for s in shapes) else -1 for i, d in enumerate(shapes[0])]
    merged.insert(data.stack_dim, len(shapes))
    return torch.Size(merged)
