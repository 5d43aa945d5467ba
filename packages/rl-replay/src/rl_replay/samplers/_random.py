"""Uniform sampling with replacement: :class:`RandomSampler`."""

from __future__ import annotations

from typing import Any

import torch

from rl_replay.samplers._without_replacement import SamplerWithoutReplacement
from rl_replay.samplers.base import (
    Sampler,
    check_batch_size,
    check_not_empty,
    check_replacement,
    device_of,
    unravel,
)

__all__ = ["RandomSampler"]


class RandomSampler(Sampler):
    """A uniformly random sampler for composable replay buffers.

    Every valid element (counted over all storage dims) is drawn with probability
    ``1 / len(storage)``, independently, with replacement. ``info`` is empty.

    Args:
        replacement (bool, optional): ``False`` builds a
            :class:`~rl_replay.SamplerWithoutReplacement` instead (its keyword
            arguments, ``drop_last`` and ``shuffle``, may then be passed too).
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from rl_replay.samplers import RandomSampler
        >>> class Storage:  # any object with ``__len__`` and ``ndim`` works
        ...     ndim = 1
        ...     def __len__(self):
        ...         return 10
        >>> _ = torch.manual_seed(0)
        >>> index, info = RandomSampler().sample(Storage(), 4)
        >>> index.shape, bool(((index >= 0) & (index < 10)).all()), info
        (torch.Size([4]), True, {})
        >>> type(RandomSampler(replacement=False, shuffle=False)).__name__
        'SamplerWithoutReplacement'
    """

    def __new__(cls, *args: Any, replacement: bool = True, **kwargs: Any) -> Any:
        # kwargs: SamplerWithoutReplacement's keywords when replacement=False
        check_replacement(replacement, cls.__name__, variant="SamplerWithoutReplacement")
        if not replacement and cls is RandomSampler:
            return SamplerWithoutReplacement(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, *, replacement: bool = True) -> None:
        super().__init__()

    def sample(self, storage: Any, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Draw ``batch_size`` uniform indices from the valid part of ``storage``.

        Raises:
            ValueError: if ``batch_size`` is not a positive int.
            RuntimeError: if the storage is empty.
        """
        if type(batch_size) is not int or batch_size <= 0:  # the checks raise; cheap when valid
            check_batch_size(batch_size, type(self).__name__)
        numel = len(storage)
        if numel == 0:
            check_not_empty(numel, type(self).__name__)
        device = getattr(storage, "device", None)
        if type(device) is not torch.device:
            device = device_of(storage)
        flat = torch.randint(numel, (batch_size,), device=device)
        return unravel(flat, storage), {}

    def _empty(self) -> None:
        return None
