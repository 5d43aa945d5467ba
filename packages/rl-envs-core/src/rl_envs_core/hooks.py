"""Extension points that packages higher in the graph fill in.

Not part of the TorchRL-documented API (so not in ``rl_envs_core.__all__``), but
public for sibling distributions: ``rl-transforms`` routes
``EnvBase(auto_reset=True)`` through its ``AutoResetTransform`` by registering a
handler factory here (with nothing registered, :class:`CarryOverAutoReset` is used),
and makes ``EnvBase.append_transform`` return its ``TransformedEnv`` by registering
a factory with :func:`register_transformed_env_factory`.

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
from rl_envs_core._transform_hook import register_transformed_env_factory

__all__ = [
    "AutoResetHandler",
    "CarryOverAutoReset",
    "register_auto_reset_handler",
    "register_transformed_env_factory",
]
