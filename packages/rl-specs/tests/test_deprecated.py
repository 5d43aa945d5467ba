"""The deprecated spec names are aliases of the new classes."""

from __future__ import annotations

import pytest
import torch

import rl_specs

ALIASES = {
    "BinaryDiscreteTensorSpec": "Binary",
    "BoundedTensorSpec": "Bounded",
    "CompositeSpec": "Composite",
    "DiscreteTensorSpec": "Categorical",
    "LazyStackedCompositeSpec": "StackedComposite",
    "LazyStackedTensorSpec": "Stacked",
    "MultiDiscreteTensorSpec": "MultiCategorical",
    "MultiOneHotDiscreteTensorSpec": "MultiOneHot",
    "NonTensorSpec": "NonTensor",
    "OneHotDiscreteTensorSpec": "OneHot",
    "UnboundedContinuousTensorSpec": "UnboundedContinuous",
    "UnboundedDiscreteTensorSpec": "UnboundedDiscrete",
}


class TestDeprecatedAliases:
    @pytest.mark.parametrize(("old", "new"), ALIASES.items())
    def test_alias_is_the_new_class(self, old, new):
        assert getattr(rl_specs, old) is getattr(rl_specs, new)

    def test_old_names_construct_new_specs(self):
        assert type(rl_specs.BoundedTensorSpec(-1.0, 1.0, shape=(2,))) is rl_specs.BoundedContinuous
        assert isinstance(rl_specs.DiscreteTensorSpec(3), rl_specs.Categorical)
        assert rl_specs.UnboundedContinuousTensorSpec(shape=(1,)).dtype is torch.float32
        assert rl_specs.UnboundedDiscreteTensorSpec(shape=(1,)).dtype is torch.int64
        composite = rl_specs.CompositeSpec(a=rl_specs.OneHotDiscreteTensorSpec(2))
        assert isinstance(composite, rl_specs.Composite)
