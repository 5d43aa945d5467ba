"""Tensor specs: shapes, dtypes, domains and composites for RL data."""

from __future__ import annotations

from ._base import TensorSpec
from ._binary import Binary
from ._bounded import Bounded, BoundedContinuous, BoundedDiscrete
from ._categorical import Categorical, MultiCategorical
from ._composite import Composite
from ._deprecated import (
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    CompositeSpec,
    DiscreteTensorSpec,
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
    "MultiCategorical",
    "MultiDiscreteTensorSpec",
    "MultiOneHot",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensor",
    "NonTensorSpec",
    "OneHot",
    "OneHotDiscreteTensorSpec",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscrete",
    "UnboundedDiscreteTensorSpec",
    "make_composite_from_td",
]
