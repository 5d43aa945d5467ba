"""tensordict's private API, all of it, for rl-specs (one call, with its reason).

CI runs the unit tests on the oldest and the newest tensordict the pyprojects allow.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict


def _checked(source: dict, batch_size: torch.Size, device: torch.device | None) -> TensorDict:
    """The public fallback of ``new_unchecked`` (a tensordict release without it).

    Examples:
        >>> _checked({"a": torch.zeros(3, 1)}, torch.Size([3]), None).batch_size
        torch.Size([3])
    """
    return TensorDict(source, batch_size=batch_size, device=device)


#: ``new_unchecked(source, batch_size, device)``: ``TensorDict(source, batch_size, device)``
#: without re-checking each entry.
#:
#: For values a spec just drew (``zero``, ``rand``, ...): they have the spec's shape and
#: device by construction, and the public constructor's per-entry check costs as much as
#: drawing them.  Private: ``_new_unsafe`` is the constructor without per-entry
#: validation; it is bound here directly (no wrapper frame: ``Composite.zero`` calls it
#: once per nested level).
new_unchecked = getattr(TensorDict, "_new_unsafe", None) or _checked
