"""UnsqueezeTransform, SqueezeTransform, PermuteTransform, FlattenObservation, CatTensors, Stack."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import EnvBase, check_env_specs
from rl_specs import Bounded, Composite, Unbounded
from rl_transforms import (
    CatTensors,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    Stack,
    TransformedEnv,
    UnaryTransform,
    UnsqueezeTransform,
)


class TestUnsqueezeTransform:
    @pytest.mark.parametrize("batch", [[], [2]])
    def test_env_shapes(self, continuous_env, batch):
        env = TransformedEnv(
            continuous_env(batch_size=batch), UnsqueezeTransform(-2, in_keys=["observation"])
        )
        assert env.observation_spec["observation"].shape == torch.Size([*batch, 1, 3])
        assert env.rollout(2)["next", "observation"].shape == torch.Size([*batch, 2, 1, 3])

    def test_inverse_squeezes(self):
        t = UnsqueezeTransform(-1, in_keys_inv=["action"])
        assert t.inv(TensorDict({"action": torch.zeros(2, 1)}))["action"].shape == torch.Size([2])

    def test_positive_dim_needs_flag(self):
        with pytest.raises(ValueError, match=r"UnsqueezeTransform expected a negative dim"):
            UnsqueezeTransform(0)
        assert UnsqueezeTransform(0, allow_positive_dim=True).dim == 0

    def test_missing_dim_raises(self):
        with pytest.raises(ValueError, match=r"UnsqueezeTransform needs dim="):
            UnsqueezeTransform()

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(continuous_env(), UnsqueezeTransform(-1, in_keys=["observation"]))
        )


class TestSqueezeTransform:
    def test_squeezes_and_inverse_unsqueezes(self):
        t = SqueezeTransform(-1, in_keys=["obs"], in_keys_inv=["action"])
        assert t(TensorDict({"obs": torch.zeros(2, 1)}))["obs"].shape == torch.Size([2])
        assert t.inv(TensorDict({"action": torch.zeros(2)}))["action"].shape == torch.Size([2, 1])

    @pytest.mark.parametrize("dim", [-1, -2])
    def test_non_singleton_dim_is_left_unchanged_like_torch_squeeze(self, dim):
        t = SqueezeTransform(dim, in_keys=["obs"])
        assert t(TensorDict({"obs": torch.zeros(2, 3)}))["obs"].shape == torch.Size([2, 3])
        spec = Composite(obs=Unbounded(shape=(2, 3)))
        assert t.transform_observation_spec(spec)["obs"].shape == torch.Size([2, 3])

    def test_check_env_specs(self, counting_env):
        env = TransformedEnv(
            counting_env(batch_size=[2]), SqueezeTransform(-1, in_keys=["observation"])
        )
        assert env.observation_spec["observation"].shape == torch.Size([2])
        check_env_specs(env)


class _MemoryEnv(EnvBase):
    """Observes a (2, 3) "memory" that the policy also feeds back as a state."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(memory=Unbounded((2, 3)))
        self.state_spec = Composite(memory=Unbounded((2, 3)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        return TensorDict({"memory": torch.arange(6.0).reshape(2, 3)})

    def _step(self, tensordict):
        memory = tensordict["memory"]
        assert memory.shape == (2, 3), "the base env gets its own layout back"
        return TensorDict({"memory": memory + 1, "reward": torch.zeros(1)})

    def _set_seed(self, seed):
        return None


class TestPermuteTransform:
    def test_state_fed_back_keeps_the_policy_layout(self):
        t = PermuteTransform((-1, -2), in_keys=["memory"], in_keys_inv=["memory"])
        env = TransformedEnv(_MemoryEnv(), t)
        assert env.state_spec["memory"].shape == env.observation_spec["memory"].shape == (3, 2)
        check_env_specs(env)
        data = env.rollout(2)
        assert data["memory"].shape == (2, 3, 2)
        assert torch.equal(data["next", "memory"][0], data["memory"][0] + 1)

    def test_permutes_trailing_dims_and_inverse(self):
        t = PermuteTransform((-1, -3, -2), in_keys=["p"], in_keys_inv=["p"])
        x = torch.randn(2, 4, 5, 3)
        y = t(TensorDict({"p": x}, [2]))["p"]
        assert y.shape == torch.Size([2, 3, 4, 5])
        assert torch.equal(t.inv(TensorDict({"p": y}, [2]))["p"], x)

    def test_bad_dims_raise(self):
        with pytest.raises(ValueError, match=r"PermuteTransform expected dims to reorder"):
            PermuteTransform((-1, -1))

    def test_check_env_specs(self, continuous_env):
        env = TransformedEnv(
            continuous_env(pixels=True), PermuteTransform((-1, -3, -2), in_keys=["pixels"])
        )
        assert isinstance(env.observation_spec["pixels"], Bounded)
        assert env.observation_spec["pixels"].shape == torch.Size([3, 8, 8])
        check_env_specs(env)


class TestFlattenObservation:
    def test_flattens(self):
        out = FlattenObservation(-3, -1)(TensorDict({"pixels": torch.zeros(2, 3, 4, 5)}, [2]))
        assert out["pixels"].shape == torch.Size([2, 60])

    def test_positive_dim_raises(self):
        with pytest.raises(ValueError, match=r"FlattenObservation expected a negative first_dim"):
            FlattenObservation(0, -1)

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(continuous_env(batch_size=[2], pixels=True), FlattenObservation(-3, -1))
        )


class TestCatTensors:
    def test_concatenates_sorted_and_deletes(self):
        out = CatTensors(["b", "a"], "v")(TensorDict({"a": torch.zeros(2), "b": torch.ones(1)}))
        assert out["v"].tolist() == [0.0, 0.0, 1.0] and set(out.keys()) == {"v"}

    def test_keep_keys_and_order(self):
        out = CatTensors(["b", "a"], "v", del_keys=False, sort=False)(
            TensorDict({"a": torch.zeros(2), "b": torch.ones(1)})
        )
        assert out["v"].tolist() == [1.0, 0.0, 0.0] and {"a", "b"} <= set(out.keys())

    def test_unsqueeze_if_oor(self):
        out = CatTensors(["a", "b"], "v", dim=-1, unsqueeze_if_oor=True)(
            TensorDict({"a": torch.zeros(3, 1), "b": torch.ones(3)}, [3])
        )
        assert out["v"].shape == torch.Size([3, 2])

    def test_default_keys_from_observation_spec(self, continuous_env):
        base = TransformedEnv(
            continuous_env(), UnaryTransform(["observation"], ["double"], fn=lambda x: x * 2)
        )
        env = TransformedEnv(base, CatTensors(out_key="vec"))
        assert env.observation_spec["vec"].shape == torch.Size([6])
        assert set(env.observation_spec.keys()) == {"vec"}

    def test_positive_dim_raises(self):
        with pytest.raises(ValueError, match=r"CatTensors expected a negative dim"):
            CatTensors(["a"], dim=0)

    def test_missing_key_raises(self):
        with pytest.raises(KeyError, match=r"CatTensors expected the entry 'b'"):
            CatTensors(["a", "b"])(TensorDict({"a": torch.zeros(1)}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(continuous_env(batch_size=[2]), CatTensors(["observation"], "vec"))
        )


class TestStack:
    @pytest.mark.parametrize("del_keys", [True, False])
    def test_deleted_inputs_take_their_emptied_groups_along(self, del_keys):
        td = TensorDict(
            {
                ("g0", "a0", "obs"): torch.zeros(3),
                ("g0", "a1", "obs"): torch.ones(3),
                ("g1", "a2", "obs"): torch.ones(3),
                ("g1", "other"): torch.zeros(1),
            }
        )
        keys = [("g0", "a0", "obs"), ("g0", "a1", "obs"), ("g1", "a2", "obs")]
        out = Stack(keys, "all", del_keys=del_keys)(td)
        assert out is td  # in place
        assert out["all"].shape == (3, 3)
        assert ("g0" in out.keys()) is not del_keys
        assert ("g1", "other") in out.keys(True)  # a group with other entries stays
        assert (("g1", "a2") in out.keys(True)) is not del_keys

    def test_stacks_and_unbinds(self):
        t = Stack(["a", "b"], "ab", in_key_inv="ab", out_keys_inv=["a", "b"], dim=-2)
        out = t(TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}))
        assert out["ab"].tolist() == [[0.0, 0.0], [1.0, 1.0]] and set(out.keys()) == {"ab"}
        back = t.inv(TensorDict({"ab": torch.tensor([[0.0, 0.0], [1.0, 1.0]])}))
        assert back["b"].tolist() == [1.0, 1.0]

    def test_positive_dim_raises(self):
        with pytest.raises(ValueError, match=r"Stack expected a negative dim"):
            Stack(["a"], "b", dim=0)

    def test_check_env_specs(self, continuous_env):
        base = TransformedEnv(
            continuous_env(), UnaryTransform(["observation"], ["o2"], fn=lambda x: x * 2)
        )
        env = TransformedEnv(base, Stack(["observation", "o2"], "both", dim=-2))
        assert env.observation_spec["both"].shape == torch.Size([2, 3])
        check_env_specs(env)
