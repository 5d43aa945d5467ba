"""make_composite_from_td."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from rl_specs import (
    Composite,
    NonTensor,
    UnboundedContinuous,
    UnboundedDiscrete,
    make_composite_from_td,
)


def make_data() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.zeros(4, 3),
            "count": torch.zeros(4, dtype=torch.int64),
            "next": TensorDict({"reward": torch.zeros(4, 1)}, batch_size=[4]),
            "text": NonTensorData("hello", batch_size=[4]),
        },
        batch_size=[4],
    )


class TestMakeCompositeFromTd:
    def test_mirrors_the_data(self):
        data = make_data()
        spec = make_composite_from_td(data)
        assert isinstance(spec, Composite) and spec.shape == (4,)
        assert type(spec["obs"]) is UnboundedContinuous and spec["obs"].shape == (4, 3)
        assert type(spec["count"]) is UnboundedDiscrete
        assert spec["next"].shape == (4,) and spec["next", "reward"].shape == (4, 1)
        assert isinstance(spec["text"], NonTensor) and spec["text"].example_data == "hello"
        assert spec.is_in(data)
        assert spec.zero()["obs"].shape == (4, 3)

    def test_null_shapes(self):
        data = TensorDict({"step": torch.tensor(0)}, batch_size=[])
        assert make_composite_from_td(data)["step"].shape == (1,)
        kept = make_composite_from_td(data, unsqueeze_null_shapes=False)
        assert kept["step"].shape == () and kept.is_in(data)

    def test_dynamic_shape_from_lazy_stack(self):
        data = LazyStackedTensorDict.lazy_stack(
            [TensorDict(obs=torch.zeros(2, 3)), TensorDict(obs=torch.zeros(5, 3))], 0
        )
        spec = make_composite_from_td(data, dynamic_shape=True)
        assert spec["obs"].shape == (2, -1, -1) and spec["obs"].is_dynamic

    def test_dynamic_shape_marks_last_dim(self):
        spec = make_composite_from_td(make_data(), dynamic_shape=True)
        assert spec["obs"].shape == (4, -1) and spec["next", "reward"].shape == (4, -1)
        assert spec["count"].shape == (4,)
        assert spec["obs"].is_in(torch.zeros(4, 7))

    def test_dynamic_lazy_stack_with_non_tensor(self):
        data = LazyStackedTensorDict.lazy_stack(
            [TensorDict(obs=torch.zeros(3), text="a"), TensorDict(obs=torch.zeros(3), text="b")],
            0,
        )
        spec = make_composite_from_td(data, dynamic_shape=True)
        assert spec["text"].shape == (2,) and spec["obs"].shape == (2, -1)

    def test_dynamic_shape_rank_mismatch(self):
        data = LazyStackedTensorDict.lazy_stack(
            [TensorDict(obs=torch.zeros(2)), TensorDict(obs=torch.zeros(2, 1))], 0
        )
        with pytest.raises(ValueError, match="same number of dims"):
            make_composite_from_td(data, dynamic_shape=True)

    def test_rejects_non_tensordict(self):
        with pytest.raises(TypeError, match="expected a TensorDict"):
            make_composite_from_td({"obs": torch.zeros(2)})
