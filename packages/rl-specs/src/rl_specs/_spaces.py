"""Domain ("space") descriptors held by specs in their ``space`` attribute."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(eq=False)
class ContinuousBox:
    """An interval ``[low, high]`` per element; ``low``/``high`` are tensors or python numbers."""

    low: torch.Tensor | float
    high: torch.Tensor | float

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContinuousBox):
            return False
        return all(
            torch.equal(torch.as_tensor(a), torch.as_tensor(b).to(torch.as_tensor(a).device))
            for a, b in ((self.low, other.low), (self.high, other.high))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ContinuousBox(low={_summary(self.low)}, high={_summary(self.high)})"


def _summary(bound: torch.Tensor | float) -> str:
    """A bound for a repr: its value when it is one number, else shape and dtype."""
    if not isinstance(bound, torch.Tensor):
        return repr(bound)
    if bound.numel() and bool((bound == bound.reshape(-1)[0]).all()):
        return f"{bound.reshape(-1)[0].item()!r} (shape={tuple(bound.shape)})"
    return f"Tensor(shape={tuple(bound.shape)}, dtype={bound.dtype})"


@dataclass(frozen=True)
class CategoricalBox:
    """The integers ``0 .. n - 1``."""

    n: int


@dataclass(frozen=True)
class BinaryBox:
    """``n`` independent values, each 0 or 1."""

    n: int


@dataclass(frozen=True)
class BoxList:
    """One box per slot of a multi-categorical or multi-one-hot spec."""

    boxes: tuple[CategoricalBox, ...]

    @classmethod
    def from_nvec(cls, nvec: list[int]) -> BoxList:
        return cls(tuple(CategoricalBox(int(n)) for n in nvec))


@dataclass(frozen=True)
class NonTensorBox:
    """Arbitrary python objects."""
