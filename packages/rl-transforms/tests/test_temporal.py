"""CatFrames and TimeMaxPool."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs, step_mdp
from rl_specs import Bounded
from rl_transforms import CatFrames, TimeMaxPool, TransformedEnv


class TestCatFrames:
    @pytest.mark.parametrize(
        "padding, first", [("same", [0.0, 0.0, 0.0]), ("constant", [-1.0, -1.0, 0.0])]
    )
    def test_env_stacks_with_padding(self, counting_env, padding, first):
        t = CatFrames(
            3, -1, in_keys=["observation"], out_keys=["stack"], padding=padding, padding_value=-1.0
        )
        env = TransformedEnv(counting_env(max_steps=10), t)
        data = env.rollout(3)
        assert data["stack"][0].tolist() == first
        assert data["next", "stack"][-1].tolist() == [1.0, 2.0, 3.0]

    def test_reset_restarts_the_stack(self, counting_env):
        env = TransformedEnv(counting_env(max_steps=2), CatFrames(2, -1, in_keys=["observation"]))
        data = env.rollout(4, break_when_any_done=False)
        assert data["observation"].tolist() == [[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 1.0]]

    def test_partial_reset_keeps_other_stacks(self, counting_env):
        env = TransformedEnv(
            counting_env(max_steps=10, batch_size=[2]), CatFrames(2, -1, in_keys=["observation"])
        )
        td = step_mdp(env.rand_step(env.reset()))
        td.set("_reset", torch.tensor([[True], [False]]))
        assert env.reset(td)["observation"].tolist() == [[0.0, 0.0], [0.0, 1.0]]

    def test_pixels_spec_and_shapes(self, continuous_env):
        env = TransformedEnv(
            continuous_env(batch_size=[2], pixels=True), CatFrames(4, -1, in_keys=["pixels"])
        )
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == torch.Size([2, 8, 8, 12])
        assert env.rollout(2)["next", "pixels"].shape == torch.Size([2, 2, 8, 8, 12])

    def test_stack_declared_as_state_for_batched_envs(self, counting_env):
        env = TransformedEnv(
            counting_env(), CatFrames(2, -1, in_keys=["observation"], out_keys=["stack"])
        )
        assert env.full_state_spec["stack"].shape == torch.Size([2])

    def test_replay_buffer_trajectories(self):
        t = CatFrames(2, -1, in_keys=["obs"])
        traj = TensorDict(
            {
                "obs": torch.arange(4.0).reshape(4, 1),
                ("next", "obs"): torch.arange(1.0, 5.0).reshape(4, 1),
                ("next", "done"): torch.tensor([[False], [True], [False], [False]]),
            },
            [4],
        )
        out = t(traj)
        assert out["obs"].tolist() == [[0.0, 0.0], [0.0, 1.0], [2.0, 2.0], [2.0, 3.0]]
        assert out["next", "obs"].tolist() == [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]

    def test_replay_buffer_batched_constant_padding(self):
        t = CatFrames(2, -1, in_keys=["obs"], padding="constant", padding_value=9.0)
        traj = TensorDict(
            {
                "obs": torch.arange(6.0).reshape(2, 3, 1),
                ("next", "done"): torch.zeros(2, 3, 1, dtype=torch.bool),
            },
            [2, 3],
        ).refine_names(None, "time")
        assert t(traj)["obs"][1].tolist() == [[9.0, 3.0], [3.0, 4.0], [4.0, 5.0]]

    def test_forward_without_batch_dims_raises(self):
        with pytest.raises(ValueError, match=r"CatFrames cannot process unbatched tensordict"):
            CatFrames(2, -1, in_keys=["obs"])(TensorDict({"obs": torch.zeros(1)}))

    def test_stored_data_without_done_raises(self):
        traj = TensorDict({"obs": torch.zeros(3, 1)}, [3]).refine_names("time")
        with pytest.raises(KeyError, match="to delimit episodes"):
            CatFrames(2, -1, in_keys=["obs"])(traj)

    def test_unnamed_time_dim_warns_and_uses_the_last(self):
        traj = TensorDict(
            {
                "obs": torch.arange(3.0).reshape(1, 3, 1),
                ("next", "done"): torch.zeros(1, 3, 1, dtype=torch.bool),
            },
            [1, 3],
        )
        with pytest.warns(UserWarning, match="no batch dim named 'time'"):
            out = CatFrames(2, -1, in_keys=["obs"], out_keys=["s"])(traj)
        assert out["s"][0].tolist() == [[0.0, 0.0], [0.0, 1.0], [1.0, 2.0]]

    def test_named_time_dim_need_not_be_last(self):
        obs = torch.arange(6.0).reshape(3, 2, 1)  # time first, 2 trajectories
        traj = TensorDict(
            {"obs": obs, ("next", "done"): torch.zeros(3, 2, 1, dtype=torch.bool)}, [3, 2]
        ).refine_names("time", None)
        out = CatFrames(2, -1, in_keys=["obs"], out_keys=["s"])(traj)
        assert out["s"][:, 1].tolist() == [[1.0, 1.0], [1.0, 3.0], [3.0, 5.0]]

    @pytest.mark.parametrize("padding", ["same", "constant"])
    def test_offline_equals_online_with_next_keys(self, counting_env, padding):
        online = CatFrames(3, -1, in_keys=["observation"], out_keys=["s"], padding=padding)
        env = TransformedEnv(counting_env(max_steps=3), online)
        data = env.rollout(8, break_when_any_done=False)
        offline = CatFrames(
            3,
            -1,
            in_keys=["observation", ("next", "observation")],
            out_keys=["s2", ("next", "s2")],
            padding=padding,
        )
        out = offline(data.clone())
        assert torch.equal(out["s2"], data["s"])
        assert torch.equal(out["next", "s2"], data["next", "s"])

    def test_future_windows_pad_after_the_episode_end(self):
        done = torch.tensor([[False], [True], [False], [False]])
        traj = TensorDict({"x": torch.arange(4.0).reshape(4, 1), ("next", "done"): done}, [4])
        t = CatFrames(
            3,
            -1,
            in_keys=["x"],
            out_keys=["w"],
            future=True,
            mask_key="m",
            padding="constant",
            padding_value=-1.0,
        )
        out = t(traj.refine_names("time"))
        assert out["w"].tolist() == [[0, 1, -1], [1, -1, -1], [2, 3, -1], [3, -1, -1]]
        assert out["m"].tolist() == [
            [False, False, True],
            [False, True, True],
            [False, False, True],
            [False, True, True],
        ]

    def test_history_mask_marks_padded_slots(self):
        done = torch.tensor([[True], [False], [False]])
        traj = TensorDict({"x": torch.arange(3.0).reshape(3, 1), ("next", "done"): done}, [3])
        out = CatFrames(3, -1, in_keys=["x"], mask_key="m")(traj.refine_names("time"))
        assert out["m"].tolist() == [[True, True, False], [True, True, False], [True, False, False]]

    def test_future_with_next_keys_raises(self):
        traj = TensorDict({"x": torch.zeros(2, 1), ("next", "x"): torch.zeros(2, 1)}, [2])
        t = CatFrames(2, -1, in_keys=["x", ("next", "x")], future=True)
        with pytest.raises(NotImplementedError, match="history windows"):
            t(traj.refine_names("time"))

    @pytest.mark.parametrize("kwargs", [{"future": True}, {"mask_key": "m"}, {"as_inverse": True}])
    def test_offline_options_refused_in_an_env(self, counting_env, kwargs):
        env = TransformedEnv(counting_env(), CatFrames(2, -1, in_keys=["observation"], **kwargs))
        with pytest.raises(RuntimeError, match="offline only"):
            env.reset()

    def test_as_inverse_stacks_on_the_inverse_path(self):
        done = torch.tensor([[False], [False], [True]])
        traj = TensorDict({"x": torch.arange(3.0).reshape(3, 1), ("next", "done"): done}, [3])
        t = CatFrames(2, -1, in_keys=["x"], as_inverse=True)
        assert t(traj.clone())["x"].shape == (3, 1)  # forward leaves data alone
        assert t.inv(traj.refine_names("time"))["x"].tolist() == [[0, 0], [0, 1], [1, 2]]

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"N": 0, "dim": -1}, "CatFrames expected N to be an int >= 1"),
            ({"N": 2, "dim": 0}, "CatFrames expected a negative dim"),
            ({"N": 2, "dim": -1, "padding": "reflect"}, "CatFrames expected padding in"),
        ],
    )
    def test_bad_arguments_raise(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            CatFrames(**kwargs)

    def test_step_without_previous_stack_raises(self):
        t = CatFrames(2, -1, in_keys=["obs"])
        with pytest.raises(KeyError, match=r"CatFrames expected the previous stack 'obs'"):
            t._step(TensorDict(), TensorDict({"obs": torch.zeros(1)}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(continuous_env(pixels=True), CatFrames(3, -3, in_keys=["pixels"]))
        )


class TestTimeMaxPool:
    def test_max_over_window(self, counting_env):
        env = TransformedEnv(
            counting_env(max_steps=10),
            TimeMaxPool(in_keys=["observation"], out_keys=["pooled"], T=2),
        )
        data = env.rollout(3)
        assert data["next", "pooled"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]

    def test_window_forgets_old_frames(self):
        t = TimeMaxPool(in_keys=["obs"], T=2)
        t._reset(TensorDict(), TensorDict({"obs": torch.tensor([5.0])}))
        values = [
            t._step(TensorDict(), TensorDict({"obs": torch.tensor([v])}))["obs"].item()
            for v in (1.0, 0.0, 2.0)
        ]
        assert values == [5.0, 1.0, 2.0]

    def test_window_is_a_buffer_shared_by_clones(self):
        t = TimeMaxPool(in_keys=["obs"], T=2)
        t._reset(TensorDict(), TensorDict({"obs": torch.tensor([5.0])}))
        assert t.clone()._window_0 is t._window_0

    def test_bad_t_raises(self):
        with pytest.raises(ValueError, match=r"TimeMaxPool expected T to be an int >= 1"):
            TimeMaxPool(T=0)

    def test_forward_raises(self):
        with pytest.raises(RuntimeError, match=r"TimeMaxPool pools successive frames"):
            TimeMaxPool()(TensorDict())

    def test_check_env_specs(self, counting_env):
        check_env_specs(
            TransformedEnv(counting_env(batch_size=[2]), TimeMaxPool(in_keys=["observation"], T=3))
        )
