"""Tensor specs: shapes, dtypes, domains and composites for RL data."""

from __future__ import annotations

from ._base import TensorSpec
from ._binary import Binary
from ._bounded import Bounded, BoundedContinuous, BoundedDiscrete
from ._categorical import Categorical, MultiCategorical
from ._composite import Composite
from ._consolidate import check_no_exclusive_keys, consolidate_spec, contains_lazy_spec
from ._deprecated import (
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    CompositeSpec,
    DiscreteTensorSpec,
    LazyStackedCompositeSpec,
    LazyStackedTensorSpec,
    MultiDiscreteTensorSpec,
    MultiOneHotDiscreteTensorSpec,
    NonTensorSpec,
    OneHotDiscreteTensorSpec,
    UnboundedContinuousTensorSpec,
    UnboundedDiscreteTensorSpec,
)
from ._from_data import make_composite_from_td
from ._non_tensor import NonTensor
from ._one_hot import MultiOneHot, OneHot
from ._stacked import Stacked, StackedComposite
from ._unbounded import Unbounded, UnboundedContinuous, UnboundedDiscrete

__version__ = "0.1.0"

__all__ = [
    "Binary",
    "BinaryDiscreteTensorSpec",
    "Bounded",
    "BoundedContinuous",
    "BoundedDiscrete",
    "BoundedTensorSpec",
    "Categorical",
    "Composite",
    "CompositeSpec",
    "DiscreteTensorSpec",
    "LazyStackedCompositeSpec",
    "LazyStackedTensorSpec",
    "MultiCategorical",
    "MultiDiscreteTensorSpec",
    "MultiOneHot",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensor",
    "NonTensorSpec",
    "OneHot",
    "OneHotDiscreteTensorSpec",
    "Stacked",
    "StackedComposite",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscrete",
    "UnboundedDiscreteTensorSpec",
    "check_no_exclusive_keys",
    "consolidate_spec",
    "contains_lazy_spec",
    "make_composite_from_td",
]
