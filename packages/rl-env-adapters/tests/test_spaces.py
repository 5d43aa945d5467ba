"""Space -> spec conversion, the conversion registry, and value readers / writers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_env_adapters import register_gym_spec_conversion
from rl_env_adapters._gym._arrays import make_reader, make_writer
from rl_env_adapters._gym._spaces import gym_space_to_spec
from rl_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Unbounded,
)

gym = pytest.importorskip("gymnasium")
S = gym.spaces

SPACES = {
    "box": (S.Box(-1, 1, (3,)), Bounded, Bounded, (3,)),
    "box_unbounded": (S.Box(-np.inf, np.inf, (2,)), Unbounded, Unbounded, (2,)),
    "box_uint8": (S.Box(0, 255, (4, 4, 3), np.uint8), Bounded, Bounded, (4, 4, 3)),
    "discrete": (S.Discrete(4), OneHot, Categorical, None),
    "multi_discrete": (S.MultiDiscrete([2, 3]), MultiOneHot, MultiCategorical, None),
    "multi_binary": (S.MultiBinary(4), Binary, Binary, (4,)),
    "multi_binary_2d": (S.MultiBinary([2, 3]), Binary, Binary, (2, 3)),
}


def _value_in(spec, value):
    if isinstance(value, dict):
        value = TensorDict(value, batch_size=spec.shape)
    return spec.is_in(value)


class TestGymSpaceToSpec:
    @pytest.mark.parametrize("name", sorted(SPACES))
    @pytest.mark.parametrize("categorical", [False, True])
    def test_leaf_spaces(self, name, categorical):
        space, onehot_cls, cat_cls, shape = SPACES[name]
        spec = gym_space_to_spec(space, categorical_action_encoding=categorical)
        assert isinstance(spec, cat_cls if categorical else onehot_cls)
        if shape is not None:
            assert spec.shape == torch.Size(shape)
        space.seed(0)
        for _ in range(5):
            value = space.sample()
            assert spec.is_in(make_reader(space, spec)(value))
            assert space.contains(make_writer(space, spec)(spec.rand()))

    def test_box_keeps_bounds_and_dtype(self):
        spec = gym_space_to_spec(
            S.Box(np.array([0.0, -2.0]), np.array([1.0, 2.0]), dtype=np.float64)
        )
        assert spec.dtype == torch.float64
        assert spec.space.low.tolist() == [0.0, -2.0]

    def test_discrete_shapes(self):
        assert gym_space_to_spec(S.Discrete(3)).shape == torch.Size([3])
        assert gym_space_to_spec(S.Discrete(3), categorical_action_encoding=True).shape == ()

    def test_discrete_with_start_is_bounded(self):
        space = S.Discrete(3, start=2)
        spec = gym_space_to_spec(space)
        assert isinstance(spec, Bounded)
        assert (spec.space.low.item(), spec.space.high.item()) == (2, 4)
        assert space.contains(make_writer(space, spec)(spec.rand()))

    def test_multi_discrete_2d_needs_categorical(self):
        space = S.MultiDiscrete([[2, 3], [4, 5]])
        assert gym_space_to_spec(space, categorical_action_encoding=True).shape == (2, 2)
        with pytest.raises(ValueError, match="categorical_action_encoding=True"):
            gym_space_to_spec(space)

    def test_dict_nested_and_state_remap(self):
        space = S.Dict(
            state=S.Box(-1, 1, (2,)), goal=S.Discrete(3), inner=S.Dict(a=S.MultiBinary(2))
        )
        spec = gym_space_to_spec(space)
        assert isinstance(spec, Composite)
        assert set(spec.keys(True, True)) == {"observation", "goal", ("inner", "a")}
        assert _value_in(spec, make_reader(space, spec)(space.sample()))
        kept = gym_space_to_spec(space, remap_state_to_observation=False)
        assert "state" in kept.keys()

    def test_dict_action_writer(self):
        space = S.Dict(move=S.Box(-1, 1, (2,)), jump=S.Discrete(2))
        spec = gym_space_to_spec(space, remap_state_to_observation=False)
        assert space.contains(make_writer(space, spec)(spec.rand()))

    @pytest.mark.parametrize("categorical", [False, True])
    def test_tuple_of_equal_spaces_stacks(self, categorical):
        space = S.Tuple([S.Discrete(3), S.Discrete(3)])
        spec = gym_space_to_spec(space, categorical_action_encoding=categorical)
        assert spec.shape[0] == 2
        assert spec.is_in(make_reader(space, spec)(space.sample()))
        assert space.contains(make_writer(space, spec)(spec.rand()))

    def test_tuple_of_unequal_spaces(self):
        space = S.Tuple([S.Box(-1, 1, (2,)), S.Box(-1, 1, (3,))])
        spec = gym_space_to_spec(space)
        assert spec.shape[0] == 2
        with pytest.raises(TypeError, match="different shapes"):
            make_reader(space, spec)

    def test_text_is_non_tensor(self):
        space = S.Text(5)
        spec = gym_space_to_spec(space)
        assert isinstance(spec, NonTensor)
        assert make_reader(space, spec)("abc") == "abc"

    def test_batch_size_prepends_dims(self):
        assert gym_space_to_spec(S.Box(-1, 1, (3,)), batch_size=(4,)).shape == (4, 3)

    def test_device(self):
        assert gym_space_to_spec(S.Box(-1, 1, (3,)), device="cpu").device == torch.device("cpu")

    def test_unknown_space_raises(self):
        with pytest.raises(
            TypeError, match=r"No spec conversion for the space Graph.*register_gym"
        ):
            gym_space_to_spec(S.Graph(S.Box(-1, 1, (2,)), None))


class TestRegisterGymSpecConversion:
    def test_register_by_class(self):
        class Angle(S.Box):
            pass

        @register_gym_spec_conversion(Angle)
        def convert(spec, dtype=None, device=None, **kwargs):
            return Unbounded(shape=spec.shape, dtype=torch.float64)

        assert gym_space_to_spec(Angle(-1, 1, (2,))).dtype == torch.float64
        assert gym_space_to_spec(S.Box(-1, 1, (2,))).dtype == torch.float32

    def test_register_by_name_reaches_nested_spaces(self):
        class Weird(S.Space):
            def __init__(self):
                super().__init__(shape=(5,), dtype=np.float32)

        @register_gym_spec_conversion("Weird")
        def convert(spec, **kwargs):
            return Unbounded(shape=spec.shape)

        spec = gym_space_to_spec(S.Dict(w=Weird()))
        assert spec["w"].shape == (5,)

    def test_bad_key_raises(self):
        with pytest.raises(TypeError, match="space class or its name"):
            register_gym_spec_conversion(3)


@pytest.mark.parametrize(
    "action",
    [
        torch.tensor([False, True, False]),
        torch.tensor([0, 0, 1]),
        torch.tensor([1, 1, 0]),  # not one-hot: the first largest entry, as numpy's argmax
        torch.tensor([[0, 1, 0], [1, 0, 0]]),  # batched: the numpy path
        torch.tensor([0.2, 0.7, 0.1]),  # floating point: the numpy path
        torch.tensor([0.0, 1.0, 0.0], requires_grad=True),
    ],
)
def test_one_hot_writer_matches_numpy_argmax(action):
    spec = OneHot(3, shape=action.shape, dtype=action.dtype)
    written = make_writer(S.Discrete(3), spec)(action)
    expected = action.detach().numpy().argmax(-1)
    assert np.array_equal(written, expected) and np.asarray(written).dtype == expected.dtype
