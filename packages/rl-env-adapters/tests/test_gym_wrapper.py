"""GymWrapper: specs, done mapping, pixels, frame skip, seeding, info, vector envs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_env_adapters import GymWrapper
from rl_env_adapters._gym._info import InfoDictReader
from rl_envs_core import check_env_specs
from rl_specs import Categorical, OneHot

gym = pytest.importorskip("gymnasium")
AutoresetMode = gym.vector.AutoresetMode


def _vector(env_id, mode, num_envs=2, **kwargs):
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        **kwargs,
    )


def _assert_no_ignored_step(data, max_steps):
    """Toy obs[1] counts steps: every transition advances it by one, ends at max_steps."""
    t, t_next = data["observation"][..., 1], data["next", "observation"][..., 1]
    assert torch.equal(t_next, t + 1)
    done = data["next", "done"].squeeze(-1)
    assert bool((t_next[done] == max_steps).all())
    assert bool(done.any())


class TestGymWrapper:
    def test_specs_of_cartpole(self):
        env = GymWrapper(gym.make("CartPole-v1"))
        assert env.observation_spec["observation"].shape == (4,)
        assert isinstance(env.action_spec, OneHot)
        assert env.reward_spec.shape == (1,) and env.reward_spec.dtype == torch.float32
        assert env.batch_size == ()

    def test_categorical_action_encoding(self):
        env = GymWrapper(gym.make("CartPole-v1"), categorical_action_encoding=True)
        assert isinstance(env.action_spec, Categorical)
        check_env_specs(env)

    def test_rollout_shapes(self):
        env = GymWrapper(gym.make("Pendulum-v1"))
        data = env.rollout(5)
        assert data.batch_size == (5,)
        assert data["next", "reward"].shape == (5, 1)
        assert set(data["next"].keys()) >= {
            "observation",
            "reward",
            "done",
            "terminated",
            "truncated",
        }

    @pytest.mark.parametrize("truncate", [False, True])
    def test_done_terminated_truncated(self, toy_env_id, truncate):
        env = GymWrapper(gym.make(toy_env_id, truncate=truncate))
        data = env.rollout(10)
        assert data.batch_size == (3,)
        last = data[-1]["next"]
        assert last["done"].item()
        assert last["terminated"].item() is not truncate
        assert last["truncated"].item() is truncate

    def test_seeding_is_deterministic(self):
        env = GymWrapper(gym.make("Pendulum-v1"))

        def run():
            env.set_seed(3)
            policy = lambda td: td.set("action", torch.ones(1))  # noqa: E731
            return env.rollout(4, policy)["next", "observation"]

        assert torch.equal(run(), run())

    def test_frame_skip_sums_rewards_and_stops_at_done(self, toy_env_id):
        env = GymWrapper(gym.make(toy_env_id, max_steps=3), frame_skip=2)
        data = env.rollout(5)
        assert data["next", "reward"].squeeze(-1).tolist() == [2.0, 1.0]

    @pytest.mark.parametrize("pixels_only", [True, False])
    def test_from_pixels(self, toy_env_id, pixels_only):
        env = GymWrapper(
            gym.make(toy_env_id, render_mode="rgb_array"), from_pixels=True, pixels_only=pixels_only
        )
        keys = set(env.observation_spec.keys())
        assert keys == ({"pixels"} if pixels_only else {"pixels", "observation"})
        data = env.rollout(2)
        assert data["next", "pixels"].shape == (2, 4, 5, 3)
        assert data["next", "pixels"][:, 0, 0, 0].tolist() == [1, 2]
        check_env_specs(env)

    def test_from_pixels_without_rgb_array_raises(self, toy_env_id):
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            GymWrapper(gym.make(toy_env_id), from_pixels=True)

    def test_device(self):
        env = GymWrapper(gym.make("CartPole-v1"), device="cpu")
        assert env.device == torch.device("cpu")
        assert env.rollout(2)["next", "observation"].device == torch.device("cpu")

    def test_not_an_env_raises(self):
        with pytest.raises(TypeError, match=r"GymEnv\('<env id>'\)"):
            GymWrapper("CartPole-v1")

    def test_action_of_wrong_shape_raises(self):
        env = GymWrapper(gym.make("CartPole-v1"))
        data = env.reset().set("action", torch.zeros(3, dtype=torch.bool))
        with pytest.raises(ValueError, match=r"should have shape \(2,\)"):
            env.step(data)

    def test_action_of_wrong_dtype_raises(self):
        env = GymWrapper(gym.make("CartPole-v1"), categorical_action_encoding=True)
        data = env.reset().set("action", torch.tensor(1.0))
        with pytest.raises(TypeError, match="integer actions"):
            env.step(data)


class TestInfoDictReader:
    def test_discovered_entries_get_specs(self, toy_env_id):
        env = GymWrapper(gym.make(toy_env_id)).set_info_dict_reader()
        assert set(env.observation_spec.keys()) == {"observation", "count"}
        data = env.rollout(3)
        assert data["next", "count"].tolist() == [1, 2, 3]
        check_env_specs(env)

    def test_private_entries_on_request(self, toy_env_id):
        env = GymWrapper(gym.make(toy_env_id)).set_info_dict_reader(ignore_private=False)
        assert "_private" in env.observation_spec.keys()

    def test_explicit_reader(self, toy_env_id):
        env = GymWrapper(gym.make(toy_env_id))
        env.set_info_dict_reader(InfoDictReader(["count"]))
        assert env.observation_spec["count"].dtype == torch.float32
        assert env.rollout(2)["next", "count"].tolist() == [1.0, 2.0]

    def test_missing_entry_raises(self):
        reader = InfoDictReader(["lives"])
        with pytest.raises(KeyError, match=r"no entry 'lives'.*Available entries: \['x'\]"):
            reader({"x": 1}, TensorDict())

    def test_batched(self, toy_env_id):
        env = GymWrapper(_vector(toy_env_id, AutoresetMode.DISABLED)).set_info_dict_reader()
        assert env.observation_spec["count"].shape == (2,)
        assert env.rollout(2)["next", "count"].tolist() == [[1, 2], [1, 2]]


class TestVectorEnvs:
    @pytest.mark.parametrize(
        "mode", [AutoresetMode.DISABLED, AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]
    )
    def test_no_step_with_ignored_action(self, toy_env_id, mode):
        env = GymWrapper(_vector(toy_env_id, mode, num_envs=3, max_steps=3))
        assert env.batch_size == (3,)
        data = env.rollout(10, break_when_any_done=False)
        assert data.batch_size == (3, 10)
        _assert_no_ignored_step(data, max_steps=3)

    def test_uneven_episodes_reset_only_finished_envs(self, toy_env_id):
        envs = [lambda n=n: gym.make(toy_env_id, max_steps=n) for n in (2, 3)]
        vec = gym.vector.SyncVectorEnv(envs, autoreset_mode=AutoresetMode.NEXT_STEP)
        data = GymWrapper(vec).rollout(7, break_when_any_done=False)
        t_next = data["next", "observation"][..., 1]
        assert t_next.tolist() == [[1, 2, 1, 2, 1, 2, 1], [1, 2, 3, 1, 2, 3, 1]]

    def test_check_env_specs(self):
        check_env_specs(GymWrapper(_vector("CartPole-v1", AutoresetMode.DISABLED)))

    def test_vector_from_pixels_needs_pixels_in_sub_envs(self, toy_env_id):
        vec = _vector(toy_env_id, AutoresetMode.DISABLED, render_mode="rgb_array")
        with pytest.raises(ValueError, match="AddRenderObservation"):
            GymWrapper(vec, from_pixels=True)

    def test_unknown_autoreset_mode_raises(self, toy_env_id):
        vec = _vector(toy_env_id, AutoresetMode.DISABLED)
        vec.metadata = {**vec.metadata, "autoreset_mode": "sometimes"}
        with pytest.raises(ValueError, match="Unknown autoreset_mode 'sometimes'"):
            GymWrapper(vec)

    def test_same_step_reads_final_obs(self, toy_env_id):
        env = GymWrapper(_vector(toy_env_id, AutoresetMode.SAME_STEP, max_steps=1))
        data = env.rollout(1)
        assert data["next", "observation"][..., 1].tolist() == [[1.0], [1.0]]
        assert np.all(data["next", "done"].numpy())

    @pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
    def test_auto_resetting_vector_envs_read_their_infos(self, toy_env_id, mode):
        env = GymWrapper(_vector(toy_env_id, mode, max_steps=2))
        assert "count" in env.observation_spec.keys()  # numeric infos only, no "_private"
        assert "_private" not in env.observation_spec.keys()
        assert (
            "count"
            not in GymWrapper(_vector(toy_env_id, AutoresetMode.DISABLED)).observation_spec.keys()
        )
        check_env_specs(env)

    def test_same_step_gives_the_terminal_info_and_the_reset_info_after(self, toy_env_id):
        env = GymWrapper(_vector(toy_env_id, AutoresetMode.SAME_STEP, max_steps=2))
        data = env.rollout(5, break_when_any_done=False)
        # the info count follows the step count t: 1, 2 (terminal), then 0 after the reset
        assert data["next", "count"][0].tolist() == [1, 2, 1, 2, 1]
        assert data["count"][0].tolist() == [0, 1, 0, 1, 0]
        assert data["next", "count"].tolist() == data["next", "observation"][..., 1].tolist()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
class TestCudaDevice:
    def test_gym_outputs_on_cuda(self):
        env = GymWrapper(gym.make("CartPole-v1"), device="cuda")
        data = env.rollout(3)
        assert data["next", "observation"].device.type == "cuda"
        check_env_specs(env)


class TestOutputFastPath:
    """Step outputs skip TensorDict's checks only when the compiled readers make them."""

    @pytest.mark.parametrize("num_envs", [None, 3])
    def test_same_data_as_the_checked_constructor(self, toy_env_id, num_envs):
        def make():
            if num_envs is None:
                return GymWrapper(gym.make(toy_env_id, max_steps=4))
            return GymWrapper(_vector(toy_env_id, AutoresetMode.DISABLED, num_envs, max_steps=4))

        fast, slow = make(), make()
        slow._output_builder.trusted = False  # forces TensorDict(...)
        assert fast._output_builder.trusted
        runs = []
        for env in (fast, slow):
            env.set_seed(0)
            torch.manual_seed(0)
            runs.append(env.rollout(12, break_when_any_done=False))
        assert (runs[0] == runs[1]).all()
        assert runs[0].batch_size == (12,) if num_envs is None else (3, 12)

    def test_string_observations_take_the_checked_path(self):
        class Words(gym.Env):
            observation_space = gym.spaces.Text(8)
            action_space = gym.spaces.Discrete(2)

            def reset(self, seed=None, options=None):
                return "start", {}

            def step(self, action):
                return f"act{int(action)}", 0.0, False, False, {}

        env = GymWrapper(Words(), categorical_action_encoding=True)
        assert not env._output_builder.trusted
        data = env.step(env.reset().set("action", torch.tensor(1)))
        assert data["next", "observation"] == "act1"

    def test_moved_env_takes_the_checked_path(self, toy_env_id):
        env = GymWrapper(gym.make(toy_env_id), device="cpu")
        env.to("cpu")
        assert env._device is not env._output_builder.device
        assert env.rand_step(env.reset())["next", "observation"].device.type == "cpu"


class _DictActionEnv(gym.Env):
    """Records the actions it receives; observes a bare float from a Box(-1, 1)."""

    def __init__(self):
        self.action_space = gym.spaces.Dict(a0=gym.spaces.Discrete(2), a1=gym.spaces.Box(-1, 1))
        self.observation_space = gym.spaces.Box(-1, 1)
        self.received = []

    def step(self, action):
        self.received.append(action)
        return 0.5, 0.0, False, False, {}

    def reset(self, *, seed=None, options=None):
        return 0.0, {}


def test_dict_action_spaces_receive_arrays_and_scalar_observations_take_the_spec_shape():
    raw = _DictActionEnv()
    data = GymWrapper(raw).rollout(3)
    assert all(
        isinstance(a["a0"], np.ndarray) and isinstance(a["a1"], np.ndarray) for a in raw.received
    )
    assert data["next", "observation"].shape == (3, 1)


@pytest.mark.parametrize("categorical", [True, False])
def test_a_discrete_action_is_sent_as_a_hashable_integer(categorical):
    from rl_env_adapters import GymEnv

    env = GymEnv("CliffWalking-v1", categorical_action_encoding=categorical)
    try:
        env.rollout(5)  # CliffWalking looks the action up in a dict
        check_env_specs(env)
    finally:
        env.close()
