"""Temporary bridge to rl_specs while its public ``__all__`` is being filled in.

Imports the spec classes from ``rl_specs``'s public namespace when exported there,
else from the modules that define them. Remove once ``rl_specs.__all__`` lists them.
"""

from __future__ import annotations

try:
    from rl_specs import (
        Binary,
        Bounded,
        Categorical,
        Composite,
        MultiCategorical,
        OneHot,
        TensorSpec,
        Unbounded,
    )
except ImportError:  # rl_specs.__all__ not filled in yet
    from rl_specs._base import TensorSpec
    from rl_specs._binary import Binary
    from rl_specs._bounded import Bounded
    from rl_specs._categorical import Categorical, MultiCategorical
    from rl_specs._composite import Composite
    from rl_specs._one_hot import OneHot
    from rl_specs._unbounded import Unbounded

__all__ = [
    "Binary",
    "Bounded",
    "Categorical",
    "Composite",
    "MultiCategorical",
    "OneHot",
    "TensorSpec",
    "Unbounded",
]
