"""Meta-package: ``rl_stack.envs``, ``.data``, ``.collectors`` and ``.record`` facades over every rl-stack distribution.

Examples:
    >>> import rl_stack.data, rl_stack.envs
    >>> import rl_specs
    >>> all(getattr(rl_stack.data, name) is getattr(rl_specs, name) for name in rl_specs.__all__)
    True
"""

from __future__ import annotations

from rl_stack import collectors, data, envs, record

__version__ = "0.1.0"

__all__ = ["collectors", "data", "envs", "record"]
