"""Dataset-id checks: an unknown id is a ``ValueError`` that suggests the closest known ids."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["check_dataset_id"]


def check_dataset_id(owner: str, dataset_id: object, available: Iterable[str]) -> str:
    """Return ``dataset_id`` if it is one of ``available``.

    Raises:
        TypeError: if ``dataset_id`` is not a string.
        ValueError: if it is unknown; the message lists the closest known ids.

    Examples:
        >>> check_dataset_id("D4RLExperienceReplay", "hopper-medium-v2", ["hopper-medium-v2"])
        'hopper-medium-v2'
        >>> check_dataset_id("D4RLExperienceReplay", "hoper-medium-v2", ["hopper-medium-v2"])
        Traceback (most recent call last):
        ...
        ValueError: D4RLExperienceReplay has no dataset 'hoper-medium-v2'. Did you mean: 'hopper-medium-v2'? The 1 known ids are listed in D4RLExperienceReplay.available_datasets.
    """
    if not isinstance(dataset_id, str):
        raise TypeError(
            f"{owner} expected dataset_id to be a str, got {type(dataset_id).__name__} "
            f"({dataset_id!r}). Pass one of {owner}.available_datasets."
        )
    known = list(available)
    if dataset_id in known:
        return dataset_id
    close = difflib.get_close_matches(dataset_id, known, n=5, cutoff=0.6)
    hint = (
        f"Did you mean: {', '.join(repr(c) for c in close)}? "
        if close
        else "No known id is close to it. "
    )
    raise ValueError(
        f"{owner} has no dataset {dataset_id!r}. {hint}"
        f"The {len(known)} known ids are listed in {owner}.available_datasets."
    )
