"""The private random generators of the native environments."""

from __future__ import annotations

import torch

__all__ = ["seeded_generator"]


def seeded_generator(seed: int | None, device: torch.device | None = None) -> torch.Generator:
    """A fresh generator on ``device`` (CPU by default) seeded with ``seed``.

    ``seed=None`` draws a non-deterministic seed.

    Examples:
        >>> a, b = seeded_generator(3), seeded_generator(3)
        >>> bool(torch.rand(2, generator=a).eq(torch.rand(2, generator=b)).all())
        True
    """
    rng = torch.Generator(device=device if device is not None else "cpu")
    if seed is None:
        rng.seed()
    else:
        rng.manual_seed(seed)
    return rng
