"""MultiThreadedEnvWrapper / MultiThreadedEnv: specs, TED auto-reset, async API, seeding."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from rl_env_adapters import MultiThreadedEnv, MultiThreadedEnvWrapper
from rl_env_adapters._envpool._specs import check_seed, specs_from_envpool
from rl_envs_core import check_env_specs
from rl_specs import Categorical, OneHot

envpool = pytest.importorskip("envpool")

CLASSIC_CONTROL = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"]


class TestSpecsFromEnvpool:
    @pytest.mark.parametrize("categorical", [False, True])
    def test_cartpole(self, categorical):
        spec = envpool.make_spec("CartPole-v1")
        specs = specs_from_envpool(spec, num_envs=3, categorical_action_encoding=categorical)
        assert specs.observation["observation"].shape == (3, 4)
        assert isinstance(specs.action, Categorical if categorical else OneHot)
        assert specs.reward.shape == (3, 1)

    def test_pendulum_bounds(self):
        specs = specs_from_envpool(envpool.make_spec("Pendulum-v1"), num_envs=2)
        assert specs.action.shape == (2, 1)
        assert specs.action.space.high.flatten().tolist() == [2.0, 2.0]

    def test_from_pixels_key(self):
        specs = specs_from_envpool(envpool.make_spec("CartPole-v1"), num_envs=1, from_pixels=True)
        assert list(specs.observation.keys()) == ["pixels"]


class TestCheckSeed:
    @pytest.mark.parametrize(("seed", "expected"), [(3, 3), ([1, 2], [1, 2]), (np.int64(4), 4)])
    def test_valid(self, seed, expected):
        assert check_seed(seed, 2) == expected

    def test_wrong_length_raises(self):
        with pytest.raises(ValueError, match=r"one seed per env \(num_envs=3\), got 2.*length 3"):
            check_seed([1, 2], 3)

    @pytest.mark.parametrize("seed", ["12", 1.5, None])
    def test_wrong_type_raises(self, seed):
        with pytest.raises(TypeError, match="int or a sequence of ints"):
            check_seed(seed, 2)


class TestMultiThreadedEnvWrapper:
    def test_wraps_a_pool(self):
        pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=0)
        env = MultiThreadedEnvWrapper(pool)
        assert env.batch_size == (3,)
        data = env.rollout(4)
        assert data["next", "observation"].shape == (3, 4, 4)
        check_env_specs(env)

    def test_not_a_pool_raises(self):
        with pytest.raises(TypeError, match="expected an EnvPool env"):
            MultiThreadedEnvWrapper(object())

    def test_available_envs(self):
        assert "CartPole-v1" in MultiThreadedEnvWrapper.available_envs
        assert "Pong-v5" in MultiThreadedEnv.available_envs

    def test_dm_pool_raises(self):
        with pytest.raises(TypeError, match="env_type='gymnasium'"):
            MultiThreadedEnvWrapper(envpool.make_dm("CartPole-v1", num_envs=2))

    def test_set_seed_raises_with_fix(self):
        env = MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2))
        with pytest.raises(RuntimeError, match=r"envpool.make\(..., seed=N\)"):
            env.set_seed(0)

    def test_zero_copy_observations(self):
        env = MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2))
        array = np.ones((2, 4), np.float32)
        out = env._read_obs(array)["observation"]
        assert out.data_ptr() == array.ctypes.data
        assert out.dtype == torch.float32

    def test_async_send_recv(self):
        pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2, seed=0)
        env = MultiThreadedEnvWrapper(pool, categorical_action_encoding=True)
        assert env.is_async
        env.async_reset()
        seen = set()
        for _ in range(6):
            data = env.recv()
            assert data.batch_size == (2,)
            seen.update(data["env_id"].tolist())
            env.send(data.set("action", torch.zeros(2, dtype=torch.long)))
        assert seen == {0, 1, 2, 3}

    def test_async_pool_refuses_sync_api(self):
        pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2)
        env = MultiThreadedEnvWrapper(pool)
        with pytest.raises(RuntimeError, match="send\\(tensordict\\) and recv\\(\\)"):
            env.reset()

    def test_send_needs_env_id(self):
        env = MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2))
        with pytest.raises(KeyError, match="missing \\['env_id'\\]"):
            env.send(env.rand_action(env.reset()))


class TestMultiThreadedEnv:
    @pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
    def test_check_env_specs(self, env_id):
        check_env_specs(MultiThreadedEnv(2, env_id))
        check_env_specs(MultiThreadedEnv(2, env_id, categorical_action_encoding=False))

    def test_discrete_actions_are_indices_by_default(self):
        env = MultiThreadedEnv(3, "CartPole-v1", seed=0)
        assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == (3,)
        td = env.reset()
        td["action"] = torch.tensor([0, 1, 1])  # what TorchRL code writes for envpool
        assert env.step(td)["next", "observation"].shape == (3, 4)
        one_hot = MultiThreadedEnv(3, "CartPole-v1", categorical_action_encoding=False)
        assert isinstance(one_hot.action_spec, OneHot) and one_hot.action_spec.shape == (3, 2)

    @pytest.mark.parametrize(
        "args",
        [((3, "CartPole-v1"), {}), (("CartPole-v1", 3), {}), (("CartPole-v1",), {"num_envs": 3})],
    )
    def test_argument_forms(self, args):
        positional, keywords = args
        env = MultiThreadedEnv(*positional, **keywords)
        assert env.batch_size == (3,) and env.env_name == "CartPole-v1"

    def test_auto_reset_never_leaks(self):
        env = MultiThreadedEnv(3, "CartPole-v1", max_episode_steps=4, seed=0)
        data = env.rollout(11, break_when_any_done=False)
        done = data["next", "done"].squeeze(-1)
        assert done[:, 3].all() and done[:, 7].all()
        assert int(done.sum()) == 6  # every episode lasts exactly 4 real steps
        # first obs of every episode is a reset obs; no step with reward 0 (an ignored action)
        assert bool((data["next", "reward"] == 1).all())

    def test_stepping_on_without_reset_resets_first(self):
        env = MultiThreadedEnv(2, "CartPole-v1", max_episode_steps=2, seed=0)
        data = env.rand_step(env.reset())
        for _ in range(3):
            data = env.rand_step(data["next"].exclude("done", "terminated", "truncated", "reward"))
            assert bool((data["next", "reward"] == 1).all())

    def test_seed_sequence_and_determinism(self):
        env = MultiThreadedEnv(2, "Pendulum-v1", seed=[5, 5])
        obs = env.reset()["observation"]
        assert torch.equal(obs[0], obs[1])
        env.set_seed(7)
        first = env.reset()["observation"]
        env.set_seed(7)
        assert torch.equal(first, env.reset()["observation"])

    def test_wrong_seed_length_raises(self):
        with pytest.raises(ValueError, match="one seed per env"):
            MultiThreadedEnv(3, "CartPole-v1", seed=[1, 2])

    def test_unknown_task_suggests(self):
        with pytest.raises(ValueError, match=r"no task 'CartPol-v1'.*CartPole-v1"):
            MultiThreadedEnv(2, "CartPol-v1")

    @pytest.mark.parametrize("num_workers", [0, -2, 1.5])
    def test_bad_num_workers_raises(self, num_workers):
        with pytest.raises(ValueError, match="positive int"):
            MultiThreadedEnv(num_workers, "CartPole-v1")

    def test_max_episode_steps(self):
        env = MultiThreadedEnv(2, "Pendulum-v1", max_episode_steps=3)
        data = env.rollout(10)
        assert data.batch_size == (2, 3)
        assert data["next", "truncated"][:, -1].all()

    def test_frame_skip(self):
        env = MultiThreadedEnv(2, "CartPole-v1", frame_skip=3, max_episode_steps=5)
        rewards = env.rollout(5)["next", "reward"].squeeze(-1)
        assert rewards.tolist() == [[3.0, 2.0]] * 2

    def test_render(self):
        env = MultiThreadedEnv(3, "CartPole-v1", render_mode="rgb_array")
        env.reset()
        frames = env.render(env_ids=[0, 2])
        assert frames.shape[0] == 2 and frames.shape[-1] == 3 and frames.dtype == torch.uint8

    def test_render_without_mode_raises(self):
        with pytest.raises(RuntimeError, match="render_mode='rgb_array'"):
            MultiThreadedEnv(1, "CartPole-v1").render()

    @pytest.mark.parametrize("task", ["Pong-v5", "Ant-v5"])
    def test_atari_and_mujoco_states(self, task):
        if task not in envpool.list_all_envs():
            pytest.skip(f"{task} is not in this envpool build")
        try:
            env = MultiThreadedEnv(2, task)
        except (RuntimeError, OSError) as err:  # assets (ROMs / MuJoCo models) missing
            pytest.skip(f"{task} assets are not available: {err}")
        check_env_specs(env)

    def test_mujoco_from_pixels(self):
        probe = (
            "import envpool; p = envpool.make('Ant-v5', env_type='gymnasium', num_envs=1, "
            "from_pixels=True); p.reset()"
        )
        if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode != 0:
            pytest.skip("MuJoCo pixel rendering needs an OpenGL context, absent on this machine")
        env = MultiThreadedEnv(1, "Ant-v5", from_pixels=True)
        assert env.rollout(2)["next", "pixels"].shape[:3] == (1, 2, 3)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
class TestCudaDevice:
    def test_envpool_outputs_on_cuda(self):
        env = MultiThreadedEnv(2, "CartPole-v1", device="cuda", max_episode_steps=3)
        data = env.rollout(5, break_when_any_done=False)
        assert data["next", "observation"].device.type == "cuda"
        check_env_specs(env)
