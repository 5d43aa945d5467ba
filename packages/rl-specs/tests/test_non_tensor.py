"""NonTensor."""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack

from rl_specs import NonTensor


class TestNonTensor:
    def test_generation_wraps_example(self):
        spec = NonTensor(shape=(2,), example_data={"a": 1})
        for method in ("rand", "zero", "one"):
            value = getattr(spec, method)((3,))
            assert isinstance(value, NonTensorData)
            assert value.batch_size == (3, 2) and value.data == {"a": 1}

    def test_default_shape(self):
        assert NonTensor().shape == (1,)

    def test_is_in(self):
        spec = NonTensor(shape=(), example_data="x")
        assert spec.is_in(spec.rand())
        assert not spec.is_in(torch.zeros(()))
        assert not NonTensor(shape=(3,)).is_in(NonTensorData("x", batch_size=[2]))
        stack = NonTensorStack.from_list(["a", "b"])
        assert NonTensor(shape=(2,)).is_in(stack)

    def test_assert_is_in(self):
        with pytest.raises(ValueError, match="NonTensorData"):
            NonTensor().assert_is_in("raw string")

    def test_encode_and_to_numpy(self):
        spec = NonTensor(shape=())
        encoded = spec.encode("hello")
        assert spec.is_in(encoded) and spec.to_numpy(encoded) == "hello"
        assert spec.encode(encoded) is encoded
        assert spec.project("raw").data == "raw"
        assert NonTensor(shape=(2,)).to_numpy(NonTensorStack.from_list(["a", "b"])) == ["a", "b"]

    def test_shape_ops_keep_example(self):
        spec = NonTensor(shape=(2,), example_data=5, batched=True)
        assert spec.expand(3, 2).shape == (3, 2)
        assert spec[0].example_data == 5 and spec.unsqueeze(0).batched

    def test_eq(self):
        assert NonTensor(shape=(1,)) == NonTensor(shape=(1,))
        assert NonTensor(shape=(1,)) != NonTensor(shape=(1,), batched=True)
