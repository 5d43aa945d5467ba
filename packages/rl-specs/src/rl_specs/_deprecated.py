"""Deprecated names of the spec classes, kept as aliases so older code keeps working.

Each alias *is* the new class, so ``BoundedTensorSpec(...)`` builds a :class:`Bounded`
(dispatching to its continuous or discrete variant) and ``isinstance`` checks agree
either way.

Examples:
    >>> import torch
    >>> from rl_specs import Bounded, Composite
    >>> spec = BoundedTensorSpec(-1.0, 1.0, shape=(2,))
    >>> isinstance(spec, Bounded), CompositeSpec is Composite
    (True, True)
    >>> UnboundedDiscreteTensorSpec(shape=(1,)).dtype
    torch.int64
"""

from __future__ import annotations

from ._binary import Binary
from ._bounded import Bounded
from ._categorical import Categorical, MultiCategorical
from ._composite import Composite
from ._non_tensor import NonTensor
from ._one_hot import MultiOneHot, OneHot
from ._stacked import Stacked, StackedComposite
from ._unbounded import UnboundedContinuous, UnboundedDiscrete

BinaryDiscreteTensorSpec = Binary
BoundedTensorSpec = Bounded
CompositeSpec = Composite
DiscreteTensorSpec = Categorical
LazyStackedCompositeSpec = StackedComposite
LazyStackedTensorSpec = Stacked
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
NonTensorSpec = NonTensor
OneHotDiscreteTensorSpec = OneHot
UnboundedContinuousTensorSpec = UnboundedContinuous
UnboundedDiscreteTensorSpec = UnboundedDiscrete
