"""Meta-package: ``rl_stack.envs``, ``.data``, ``.collectors`` and ``.record`` facades over every rl-stack distribution.

Examples:
    >>> import rl_stack.data, rl_stack.envs
    >>> import rl_specs
    >>> all(getattr(rl_stack.data, name) is getattr(rl_specs, name) for name in rl_specs.__all__)
    True
"""

from __future__ import annotations

from rl_stack import collectors, data, envs, record
from rl_transforms import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env

__version__ = "0.1.0"

__all__ = [
    "auto_unwrap_transformed_env",
    "collectors",
    "data",
    "envs",
    "record",
    "set_auto_unwrap_transformed_env",
]
