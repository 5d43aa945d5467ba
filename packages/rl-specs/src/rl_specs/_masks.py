"""Helpers shared by the categorical and one-hot specs: ``n`` checks and category masks."""

from __future__ import annotations

from typing import Any

import torch

from ._base import TensorSpec


def _check_n(n: Any, *, owner: str, name: str = "n") -> int:  # Any: validated here
    if isinstance(n, torch.Tensor) and n.numel() == 1:
        n = n.item()
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            f"{owner} expected {name} to be an int, got {n!r} of type {type(n).__name__}. "
            f"Pass the number of categories, e.g. {name}=4."
        )
    if n < 0:
        raise ValueError(
            f"{owner} expected {name} >= 0 (the number of categories), got {name}={n}. "
            "Pass a positive number of categories (0 gives a spec with no value to draw)."
        )
    return n


def _no_category(owner: str, sizes: Any) -> ValueError:  # Any: an int or a list of ints
    """The error of ``rand`` on a spec with a slot of no category."""
    return ValueError(
        f"{owner}.rand() cannot draw a value: a slot has no category (sizes {sizes}). "
        "Give every slot at least one category."
    )


def _check_mask(
    mask: torch.Tensor | None, shape: torch.Size, device: torch.device | None, *, owner: str
) -> torch.Tensor | None:
    """Validate a boolean mask and broadcast it to ``shape`` (None stays None)."""
    if mask is None:
        return None
    mask = torch.as_tensor(mask, device=device)
    shape = torch.Size(1 if d == -1 else d for d in shape)  # a dynamic dim shares one mask
    if mask.dtype is not torch.bool:
        raise TypeError(
            f"{owner} expected a torch.bool mask, got dtype {mask.dtype}. Pass mask.bool()."
        )
    try:
        return mask.expand(shape).clone()
    except RuntimeError as err:
        raise ValueError(
            f"{owner} expected a mask of shape {tuple(shape)} (or broadcastable to it), got "
            f"shape {tuple(mask.shape)}. Give one boolean per category."
        ) from err


def _sample_masked(mask: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """Draw one allowed index per row of ``mask`` (last dim = categories), as int64.

    Raises:
        ValueError: if some row of the mask allows no category.
    """
    mask = mask.expand(*lead, *mask.shape)
    flat = mask.reshape(-1, mask.shape[-1])
    if flat.numel() and not bool(flat.any(-1).all()):
        raise ValueError(
            "Cannot sample from a mask that allows no category in some row. "
            "Set at least one True per row with spec.update_mask(mask)."
        )
    if flat.shape[0] == 0:
        return torch.zeros(mask.shape[:-1], dtype=torch.int64, device=mask.device)
    return torch.multinomial(flat.float(), 1).reshape(mask.shape[:-1])


def _project_masked(val: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``val`` (category indices) with every masked-out index replaced by an allowed one."""
    mask = mask.expand(*val.shape, mask.shape[-1])
    ok = mask.gather(-1, val.long().unsqueeze(-1)).squeeze(-1)
    return torch.where(ok, val, _sample_masked(mask, torch.Size()).to(val.dtype))


def _mask_allows(mask: torch.Tensor, index: torch.Tensor) -> bool:
    mask = mask.expand(*index.shape, mask.shape[-1])
    return bool(mask.gather(-1, index.long().unsqueeze(-1)).all())


class _MaskedCategories:
    """What categorical and one-hot specs share: ``n``, ``cardinality`` and the mask."""

    space: Any  # CategoricalBox
    shape: torch.Size
    device: torch.device
    mask: torch.Tensor | None

    def _mask_shape(self) -> torch.Size:
        raise NotImplementedError  # abstract: each spec lays its mask out differently

    @property
    def n(self) -> int:
        """The number of categories."""
        return self.space.n

    def cardinality(self) -> int:
        """The number of distinct values one sample can take."""
        return self.space.n

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Replace the mask (``None`` allows every category again).

        Raises:
            TypeError: if the mask is not boolean.
            ValueError: if it does not broadcast to the mask shape.
        """
        self.mask = _check_mask(mask, self._mask_shape(), self.device, owner=type(self).__name__)

    def _tensor_attrs(self) -> dict[str, torch.Tensor]:
        return {} if self.mask is None else {"mask": self.mask}

    def _extra_eq(self, other: TensorSpec) -> bool:
        return self.space == other.space and (self.mask is None) == (other.mask is None)
