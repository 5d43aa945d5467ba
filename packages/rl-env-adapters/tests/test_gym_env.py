"""GymEnv: building by id, kwargs routing, vector batches, bad ids, check_env_specs."""

from __future__ import annotations

import pytest
import torch

from rl_env_adapters import GymEnv, GymWrapper, gym_backend, set_gym_backend
from rl_envs_core import check_env_specs

gym = pytest.importorskip("gymnasium")

CLASSIC_CONTROL = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"]


class TestGymEnv:
    @pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
    @pytest.mark.parametrize("categorical", [False, True])
    def test_check_env_specs(self, env_id, categorical):
        env = GymEnv(env_id, categorical_action_encoding=categorical)
        assert isinstance(env, GymWrapper)
        check_env_specs(env)

    def test_kwargs_reach_gym_make(self):
        env = GymEnv("Pendulum-v1", g=9.81)
        assert env.unwrapped.g == 9.81

    def test_attributes_of_the_base_env_are_reached_through_gym_wrappers(self):
        env = GymEnv("Pendulum-v1", g=9.81)
        assert env.g == 9.81  # Pendulum's attribute, behind gymnasium's TimeLimit wrapper
        with pytest.raises(AttributeError, match="no_such_attribute"):
            _ = env.no_such_attribute

    def test_env_base_kwargs_stay_with_the_wrapper(self):
        env = GymEnv("Pendulum-v1", run_type_checks=True, allow_done_after_reset=True, device="cpu")
        assert env.run_type_checks and env.allow_done_after_reset

    def test_render_mode_reaches_gym_make(self, toy_env_id):
        assert GymEnv(toy_env_id, render_mode="rgb_array").render_mode == "rgb_array"

    def test_from_pixels_sets_render_mode(self, toy_env_id):
        env = GymEnv(toy_env_id, from_pixels=True)
        assert env.rollout(1)["next", "pixels"].shape == (1, 4, 5, 3)

    def test_env_name_is_kept(self):
        assert GymEnv("CartPole-v1").env_name == "CartPole-v1"

    def test_available_envs(self):
        assert "CartPole-v1" in GymEnv.available_envs
        assert "Pendulum-v1" in GymEnv("CartPole-v1").available_envs

    def test_backend_from_context(self):
        with set_gym_backend("gymnasium"):
            env = GymEnv("Pendulum-v1")
        assert type(env._env.unwrapped).__module__.startswith("gymnasium")
        assert gym_backend() is gym

    def test_unknown_id_suggests_close_ids(self):
        with pytest.raises(ValueError, match=r"unknown env id 'CartPol-v1'.*CartPole-v1"):
            GymEnv("CartPol-v1")

    def test_non_string_id_raises(self):
        with pytest.raises(TypeError, match="use GymWrapper"):
            GymEnv(gym.make("CartPole-v1"))


class TestGymEnvBatched:
    @pytest.mark.parametrize("num_envs", [0, -1, 2.5, True])
    def test_bad_num_envs_raises(self, num_envs):
        with pytest.raises(ValueError, match="positive int"):
            GymEnv("CartPole-v1", num_envs=num_envs)

    def test_sync_batch(self, toy_env_id):
        env = GymEnv(toy_env_id, num_envs=3, vectorization_mode="sync", max_steps=2)
        assert env.batch_size == (3,)
        data = env.rollout(5, break_when_any_done=False)
        t_next = data["next", "observation"][..., 1]
        assert t_next.tolist() == [[1.0, 2.0, 1.0, 2.0, 1.0]] * 3
        check_env_specs(env)

    def test_async_batch_resets_per_env(self, toy_env_id):
        env = GymEnv(toy_env_id, num_envs=2, max_steps=2)  # AsyncVectorEnv by default
        try:
            env.set_seed(0)
            data = env.rollout(5, break_when_any_done=False)
            assert data["next", "observation"][..., 1].tolist() == [[1, 2, 1, 2, 1]] * 2
        finally:
            env.close()

    def test_batched_seeding(self):
        env = GymEnv("Pendulum-v1", num_envs=2, vectorization_mode="sync")
        env.set_seed(1)
        first = env.reset()["observation"]
        env.set_seed(1)
        assert torch.equal(first, env.reset()["observation"])
        assert not torch.equal(first[0], first[1])  # sub-envs get seed, seed + 1

    def test_batched_pixels(self, toy_env_id):
        env = GymEnv(toy_env_id, num_envs=2, vectorization_mode="sync", from_pixels=True)
        assert env.rollout(2)["next", "pixels"].shape == (2, 2, 4, 5, 3)
