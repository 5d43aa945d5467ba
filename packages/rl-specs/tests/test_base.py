"""Behaviour shared by every leaf spec: generation, checks and the tensor-like shape ops."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

from rl_specs import (
    Binary,
    Bounded,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    TensorSpec,
    Unbounded,
)
from rl_specs._base import _as_device, _as_dtype, _as_shape

# factories of one spec per leaf class, all of shape (2, 3, <event>)
LEAVES = {
    "unbounded": lambda: Unbounded(shape=(2, 3, 4)),
    "unbounded_int": lambda: Unbounded(shape=(2, 3, 4), dtype=torch.int32),
    "bounded": lambda: Bounded(low=-1.0, high=torch.arange(4.0) + 1, shape=(2, 3, 4)),
    "bounded_int": lambda: Bounded(low=0, high=9, shape=(2, 3, 4), dtype=torch.int64),
    "categorical": lambda: Categorical(5, shape=(2, 3, 4)),
    "categorical_mask": lambda: Categorical(
        3, shape=(2, 3, 4), mask=torch.tensor([True, False, True])
    ),
    "one_hot": lambda: OneHot(4, shape=(2, 3, 4)),
    "one_hot_mask": lambda: OneHot(4, shape=(2, 3, 4), mask=torch.tensor([1, 1, 0, 1]).bool()),
    "multi_one_hot": lambda: MultiOneHot([1, 3], shape=(2, 3, 4)),
    "multi_categorical": lambda: MultiCategorical([2, 3, 4, 5], shape=(2, 3, 4)),
    "binary": lambda: Binary(4, shape=(2, 3, 4)),
}
leaf_params = pytest.mark.parametrize("make", LEAVES.values(), ids=LEAVES.keys())


class TestTensorSpec:
    @leaf_params
    @pytest.mark.parametrize("method", ["rand", "zero", "one"])
    def test_generation_prepends_shape(self, make, method):
        spec = make()
        value = getattr(spec, method)((5,))
        assert value.shape == (5, 2, 3, 4)
        assert value.dtype == spec.dtype
        assert getattr(spec, method)().shape == spec.shape

    @leaf_params
    def test_rand_is_in(self, make):
        spec = make()
        assert spec.is_in(spec.rand())
        assert spec.is_in(spec.rand((2,)))
        spec.assert_is_in(spec.rand())

    @leaf_params
    def test_is_in_rejects_wrong_dtype_and_shape(self, make):
        spec = make()
        value = spec.rand()
        other = torch.float64 if spec.dtype != torch.float64 else torch.float32
        assert not spec.is_in(value.to(other))
        assert not spec.is_in(value[0])
        assert not spec.is_in(value.tolist())

    @leaf_params
    def test_assert_is_in_names_the_problem(self, make):
        spec = make()
        with pytest.raises(TypeError, match="expected dtype"):
            spec.assert_is_in(spec.rand().to(torch.float64))
        with pytest.raises(ValueError, match="shape ends with"):
            spec.assert_is_in(spec.rand()[0])
        with pytest.raises(TypeError, match=r"expected a torch\.Tensor"):
            spec.assert_is_in([1, 2])

    @leaf_params
    def test_assert_is_in_errors_are_assertion_errors(self, make):
        spec = make()
        bad_values = [spec.rand().to(torch.float64), spec.rand()[0], [1, 2]]
        if not isinstance(spec, Unbounded):
            bad_values.append(spec.rand() + 5)
        for bad in bad_values:
            with pytest.raises(AssertionError):  # as code written for TorchRL expects
                spec.assert_is_in(bad)

    @leaf_params
    def test_project_keeps_valid_values(self, make):
        spec = make()
        value = spec.rand()
        assert spec.project(value) is value

    @leaf_params
    def test_index_expand_reshape_unbind(self, make):
        spec = make()
        assert spec[0].shape == (3, 4)
        assert spec[:, 1].shape == (2, 4)
        # Ellipsis spans the batch dims: event dims (one-hot, slots) are never indexed
        assert spec[..., 0].shape == ((2, 4) if spec._event_ndim else (2, 3))
        assert spec.expand(7, 2, 3, 4).shape == (7, 2, 3, 4)
        assert spec.expand((7, *spec.shape)).shape == (7, 2, 3, 4)
        assert spec.unsqueeze(0).shape == (1, 2, 3, 4)
        assert spec.unsqueeze(0).squeeze(0) == spec
        assert spec.unsqueeze(1).squeeze().shape == spec.shape
        assert spec.reshape(6, 4).shape == (6, 4)
        assert spec.view(3, 2, 4).shape == (3, 2, 4)
        assert spec.flatten(0, 1).shape == (6, 4)
        parts = spec.unbind(0)
        assert len(parts) == 2 and all(p == spec[0] for p in parts)
        for derived in (spec[0], spec.expand(7, 2, 3, 4), spec.reshape(6, 4), parts[1]):
            assert type(derived) is type(spec)
            assert derived.is_in(derived.rand())

    @leaf_params
    def test_clone_eq_and_to(self, make):
        spec = make()
        copy = spec.clone()
        assert copy == spec and copy is not spec
        assert spec.to("cpu").device == torch.device("cpu")
        assert spec.cpu() == spec.to("cpu")
        assert spec != spec.unsqueeze(0)
        assert spec != "not a spec"

    @leaf_params
    def test_pickle_and_deepcopy(self, make):
        spec = make()
        assert pickle.loads(pickle.dumps(spec)) == spec
        assert copy.deepcopy(spec) == spec

    @leaf_params
    def test_encode_numpy_and_to_numpy(self, make):
        spec = make()
        value = spec.rand()
        array = spec.to_numpy(value, safe=True)
        assert isinstance(array, np.ndarray)
        assert torch.equal(spec.encode(array), value)

    @leaf_params
    def test_dynamic_spec_is_accepted_and_generates_at_size_one(self, make):
        spec = make().unsqueeze(0).expand(-1, 2, 3, 4)
        assert spec.shape == (-1, 2, 3, 4) and spec.is_dynamic  # -1 over a size-1 dim
        assert spec.expand(5, 2, 3, 4).rand().shape == (5, 2, 3, 4)
        assert make().expand(-1, -1, 4).shape == (2, 3, 4)  # -1 keeps other sizes
        dynamic = Unbounded(shape=(3, -1, 2))
        assert dynamic.is_dynamic and dynamic.numel() == -1
        assert dynamic.rand().shape == dynamic.zero().shape == dynamic.one().shape == (3, 1, 2)
        assert dynamic.rand((4,)).shape == (4, 3, 1, 2)
        assert dynamic.is_in(dynamic.rand())
        assert spec.rand().shape == (1, 2, 3, 4) and spec.is_in(spec.rand())
        assert dynamic.is_in(torch.zeros(3, 7, 2))
        assert not dynamic.is_in(torch.zeros(3, 7, 3))
        assert dynamic.expand(3, 5, 2).rand().shape == (3, 5, 2)
        assert dynamic[0].shape == (-1, 2)
        assert dynamic.unsqueeze(0).shape == (1, 3, -1, 2)

    def test_leaves_default_to_the_default_device(self):
        assert Unbounded().device == torch.get_default_device()
        assert Categorical(3).rand().device == torch.get_default_device()

    def test_ndim_numel_and_sample(self):
        spec = Unbounded(shape=(2, 3))
        assert spec.ndim == spec.ndimension() == 2
        assert spec.numel() == 6
        assert spec.sample().shape == (2, 3)

    @pytest.mark.parametrize("shape", [(-2,), (3, -5)])
    def test_negative_shape_is_rejected(self, shape):
        with pytest.raises(ValueError, match="-1 for a dynamic dim"):
            Unbounded(shape=shape)

    def test_bad_shape_type_is_rejected(self):
        with pytest.raises(TypeError, match="expected shape"):
            Unbounded(shape="abc")

    def test_bad_device_is_rejected(self):
        with pytest.raises(ValueError, match="device"):
            Unbounded(shape=(1,), device="not-a-device")

    def test_bad_dtype_is_rejected(self):
        with pytest.raises(TypeError, match="expected dtype"):
            Unbounded(shape=(1,), dtype="floaty")
        assert _as_dtype("int32", torch.float32, owner="x") is torch.int32
        assert _as_dtype("torch.float16", torch.float32, owner="x") is torch.float16

    def test_helpers(self):
        assert _as_shape(3, owner="x") == torch.Size([3])
        assert _as_shape(None, owner="x") == torch.Size([])
        assert _as_device(None) is None
        assert _as_device("cpu") == torch.device("cpu")

    def test_index_over_too_many_dims_raises(self):
        with pytest.raises(IndexError, match="indexable dims"):
            OneHot(3, shape=(2, 3))[0, 1]

    def test_expand_errors(self):
        spec = Unbounded(shape=(2, 3))
        with pytest.raises(ValueError, match="must end with the spec's shape"):
            spec.expand(4, 3)
        with pytest.raises(ValueError, match="must end with the spec's shape"):
            spec.expand(3)
        assert spec.expand(4, -1, -1).shape == (4, 2, 3)
        assert Unbounded(shape=(1, 3)).expand(5, 3).shape == (5, 3)

    def test_event_dims_are_protected(self):
        spec = OneHot(3, shape=(2, 3))
        with pytest.raises(ValueError, match="event dim"):
            spec.squeeze(-1)
        with pytest.raises(ValueError, match="after the event dims"):
            spec.unsqueeze(-1)
        with pytest.raises(ValueError, match="event dim"):
            spec.unbind(1)
        with pytest.raises(ValueError, match="keep the event dims"):
            spec.reshape(3, 2)
        with pytest.raises(ValueError, match="cannot change the event dims"):
            OneHot(1, shape=(2, 1)).expand(2, 5)

    def test_reshape_with_wrong_numel_raises(self):
        with pytest.raises(ValueError, match="Keep the number of elements"):
            Unbounded(shape=(2, 3)).reshape(4)

    def test_unbind_dynamic_dim_raises(self):
        with pytest.raises(ValueError, match="dynamic dim"):
            Unbounded(shape=(-1, 2)).unbind(0)

    def test_squeeze_non_singleton_is_a_copy(self):
        spec = Unbounded(shape=(2, 3))
        assert spec.squeeze(0) == spec and spec.squeeze() == spec

    def test_to_dtype_casts(self):
        spec = Bounded(low=0.0, high=3.0, shape=(2,))
        as_int = spec.to(torch.int64)
        assert as_int.dtype is torch.int64 and type(as_int).__name__ == "BoundedDiscrete"
        assert Unbounded(shape=(2,)).to(torch.float64).dtype is torch.float64

    def test_encode_reshapes_matching_numel_and_rejects_others(self):
        spec = Unbounded(shape=(2, 2))
        assert spec.encode([1.0, 2.0, 3.0, 4.0]).shape == (2, 2)
        with pytest.raises(ValueError, match="Reshape the value"):
            spec.encode([1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="Shape mismatch") as info:
            spec.encode(np.zeros((3, 2, 2)))  # a batch needs a batched spec
        assert isinstance(info.value, RuntimeError)  # what code written for TorchRL catches
        assert spec.expand(3, 2, 2).encode(np.zeros((3, 2, 2))).shape == (3, 2, 2)
        assert Unbounded(shape=(-1, 2)).encode(np.zeros((5, 2))).shape == (5, 2)
        readonly = np.zeros((2, 2), dtype=np.float32)
        readonly.flags.writeable = False
        assert spec.encode(readonly).shape == (2, 2)

    def test_type_check(self):
        spec = Unbounded(shape=(2,))
        spec.type_check(torch.zeros(2))
        with pytest.raises(TypeError, match="at key 'obs' expected dtype"):
            spec.type_check(torch.zeros(2, dtype=torch.int64), "obs")

    @leaf_params
    def test_torch_functions(self, make):
        spec = make()
        assert torch.unsqueeze(spec, 0) == spec.unsqueeze(0)
        assert torch.squeeze(spec.unsqueeze(0), 0) == spec
        assert torch.squeeze(spec.unsqueeze(1)) == spec
        assert torch.unbind(spec, 1) == spec.unbind(1)
        picked = torch.index_select(spec, 1, torch.tensor([0, 2]))
        assert picked.shape == (2, 2, 4) and picked == spec[:, torch.tensor([0, 2])]
        assert spec.clear_device_() is spec

    def test_generic_index_and_unsupported_torch_function(self):
        spec = Unbounded(shape=(3,))
        assert torch.equal(spec.index(1, torch.arange(3)), torch.tensor(1))
        with pytest.raises(TypeError):
            torch.cat([spec, spec])

    def test_is_abstract_for_bare_instances(self):
        spec = TensorSpec(shape=(2,), space=None)
        with pytest.raises(NotImplementedError):
            spec.rand()
        with pytest.raises(NotImplementedError):
            spec.is_in(torch.zeros(2))

    @pytest.mark.cuda
    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    @leaf_params
    def test_to_cuda(self, make):
        spec = make().cuda()
        assert spec.device.type == "cuda"
        assert spec.rand().device.type == "cuda"
        assert spec.is_in(spec.rand())
