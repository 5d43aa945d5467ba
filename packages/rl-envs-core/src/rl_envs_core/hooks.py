"""Extension points that packages higher in the graph fill in.

Not part of the TorchRL-documented API (so not in ``rl_envs_core.__all__``), but
public for sibling distributions: ``rl-transforms`` routes
``EnvBase(auto_reset=True)`` through its ``AutoResetTransform`` by registering a
handler factory here. With nothing registered, :class:`CarryOverAutoReset` is used.

Examples:
    >>> from rl_envs_core.hooks import AutoResetHandler, CarryOverAutoReset
    >>> isinstance(CarryOverAutoReset(replace=True), AutoResetHandler)
    True
"""

from __future__ import annotations

from rl_envs_core._auto_reset import (
    AutoResetHandler,
    CarryOverAutoReset,
    register_auto_reset_handler,
)

__all__ = ["AutoResetHandler", "CarryOverAutoReset", "register_auto_reset_handler"]
