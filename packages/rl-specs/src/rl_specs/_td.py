"""tensordict's private API, all of it, for rl-specs (one call, with its reason).

CI runs the unit tests on the oldest and the newest tensordict the pyprojects allow.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

#: TensorDict's constructor without per-entry checks (the public one where a
#: tensordict release lacks it)
_new_unchecked = getattr(TensorDict, "_new_unsafe", None)


def new_unchecked(source: dict, batch_size: torch.Size, device: torch.device | None) -> TensorDict:
    """``TensorDict(source, batch_size, device)`` without re-checking each entry.

    For values a spec just drew (``zero``, ``rand``, ...): they have the spec's
    shape and device by construction, and the public constructor's per-entry check
    costs as much as drawing them.

    Examples:
        >>> new_unchecked({"a": torch.zeros(3, 1)}, torch.Size([3]), None).batch_size
        torch.Size([3])
    """
    if _new_unchecked is None:  # public fallback
        return TensorDict(source, batch_size=batch_size, device=device)
    # private: _new_unsafe is the constructor without per-entry validation
    return _new_unchecked(source, batch_size=batch_size, device=device)
