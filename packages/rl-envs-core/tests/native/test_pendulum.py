"""PendulumEnv: stateless dynamics, batch-unlocked resets, seeding and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core._native._pendulum import PendulumEnv
from rl_envs_core.testing import EnvContract


def _state(th, thdot, action, **params):
    td = PendulumEnv.gen_params(**params)
    td["th"] = torch.tensor(th)
    td["thdot"] = torch.tensor(thdot)
    td["action"] = torch.tensor([action])
    return td


class TestPendulumEnv(EnvContract):
    def make_env(self):
        return PendulumEnv(seed=0)

    def test_reset_keys_and_bounds(self):
        env = PendulumEnv(seed=0)
        td = env.reset()
        assert {"th", "thdot", "params", "done", "terminated"} <= set(td.keys())
        assert td.batch_size == torch.Size([])
        assert -math.pi <= td["th"].item() <= math.pi
        assert -1.0 <= td["thdot"].item() <= 1.0
        assert not td["done"].any()

    @pytest.mark.parametrize("batch_size", [[4], [2, 3]])
    def test_reset_batch_follows_params(self, batch_size):
        env = PendulumEnv(seed=0)
        td = env.reset(env.gen_params(batch_size=batch_size))
        assert td.batch_size == torch.Size(batch_size)
        assert td["th"].shape == torch.Size(batch_size)
        assert td["done"].shape == torch.Size([*batch_size, 1])

    def test_reset_without_params_uses_env_params(self):
        env = PendulumEnv(env_params := PendulumEnv.gen_params(g=3.0), seed=0)
        assert env_params["params", "g"].item() == 3.0
        td = env.reset(TensorDict(batch_size=[5]))
        assert td["params", "g"].tolist() == [3.0] * 5

    def test_reset_keeps_given_params(self):
        env = PendulumEnv(seed=0)
        params = env.gen_params(g=1.5, batch_size=[2])
        params["params", "g"][1] = 20.0
        td = env.reset(params)
        assert td["params", "g"].tolist() == [1.5, 20.0]

    def test_step_dynamics_and_reward(self):
        env = PendulumEnv(seed=0)
        th, thdot, u = 0.5, -0.3, 1.2
        out = env.step(_state(th, thdot, u))["next"]
        g, m, length, dt = 10.0, 1.0, 1.0, 0.05
        new_thdot = thdot + (3 * g / (2 * length) * math.sin(th) + 3.0 / (m * length**2) * u) * dt
        new_th = th + new_thdot * dt
        cost = th**2 + 0.1 * thdot**2 + 0.001 * u**2
        assert out["thdot"].item() == pytest.approx(new_thdot, rel=1e-5)
        assert out["th"].item() == pytest.approx(new_th, rel=1e-5)
        assert out["reward"].item() == pytest.approx(-cost, rel=1e-5)
        assert out["reward"].shape == torch.Size([1])
        assert not out["done"].any()

    def test_angle_cost_is_normalized(self):
        env = PendulumEnv(seed=0)
        a = env.step(_state(0.1, 0.0, 0.0))["next", "reward"]
        b = env.step(_state(0.1 + 2 * math.pi, 0.0, 0.0))["next", "reward"]
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

    @pytest.mark.parametrize(
        ("key", "value", "bound"), [("max_torque", 100.0, 2.0), ("max_speed", 0.0, 8.0)]
    )
    def test_torque_and_speed_are_clamped(self, key, value, bound):
        env = PendulumEnv(seed=0)
        if key == "max_torque":
            big, small = _state(0.0, 0.0, value), _state(0.0, 0.0, bound)
            torch.testing.assert_close(
                env.step(big)["next", "thdot"], env.step(small)["next", "thdot"]
            )
        else:
            out = env.step(_state(1.5, 7.99, 2.0))["next"]
            assert out["thdot"].item() == pytest.approx(bound)

    @pytest.mark.parametrize("edit", ["in_place", "replaced"])
    def test_params_edited_between_steps_are_used(self, edit):
        env = PendulumEnv(seed=0)
        td = _state(0.5, 0.0, 0.0)
        before = env.step(td)["next", "thdot"].clone()
        if edit == "in_place":
            td["params", "g"].zero_()
        else:
            td["params", "g"] = torch.tensor(0.0)
        after = env.step(td)["next", "thdot"]
        assert before.item() > 0 and after.item() == 0.0

    def test_gen_params_defaults(self):
        params = PendulumEnv.gen_params()["params"]
        assert {k: params[k].item() for k in params.keys()} == pytest.approx(
            {"max_speed": 8, "max_torque": 2.0, "dt": 0.05, "g": 10.0, "m": 1.0, "l": 1.0}
        )

    def test_gen_params_batch(self):
        td = PendulumEnv.gen_params(g=9.81, batch_size=[3])
        assert td.batch_size == torch.Size([3])
        assert td["params", "g"].tolist() == pytest.approx([9.81] * 3)

    def test_specs(self):
        env = PendulumEnv(seed=0)
        assert env.batch_locked is False
        assert env.batch_size == torch.Size([])
        assert env.action_spec.shape == torch.Size([1])
        assert env.action_spec.high.item() == 2.0
        assert set(env.observation_spec.keys()) == {"th", "thdot", "params"}
        assert set(env.state_spec.keys()) == {"th", "thdot", "params"}
        assert env.reward_spec.shape == torch.Size([1])

    def test_same_seed_same_rollout(self):
        def run(seed):
            env = PendulumEnv(seed=seed)
            torch.manual_seed(seed)
            return env.rollout(20)

        first, second, other = run(3), run(3), run(4)
        assert (first == second).all()
        assert not torch.equal(first["th"], other["th"])

    def test_set_seed_replays_resets(self):
        env = PendulumEnv()
        env.set_seed(7)
        a = env.reset(env.gen_params(batch_size=[8]))["th"]
        env.set_seed(7)
        b = env.reset(env.gen_params(batch_size=[8]))["th"]
        torch.testing.assert_close(a, b)

    def test_batched_rollout(self):
        env = PendulumEnv(seed=0)
        data = env.rollout(10, tensordict=env.reset(env.gen_params(batch_size=[4])))
        assert data.batch_size == torch.Size([4, 10])
        assert (data[:, 1:]["th"] == data[:, :-1]["next", "th"]).all()

    def test_check_env_specs(self):
        from rl_envs_core import check_env_specs

        check_env_specs(PendulumEnv(seed=0))

    @pytest.mark.parametrize("device", [None, "cpu"])
    def test_step_output_carries_the_input_device(self, device):
        env = PendulumEnv(seed=0, device=device)
        data = env.rand_action(env.reset())
        assert env._step(data).device == data.device
        data = env.rollout(3)
        assert data.device == env.device and data["next"].device == env.device


class TestPendulumEnvErrors:
    def test_batched_td_params_rejected(self):
        with pytest.raises(ValueError, match=r"unbatched td_params.*env.reset"):
            PendulumEnv(PendulumEnv.gen_params(batch_size=[2]))

    def test_missing_param_in_td_params(self):
        params = PendulumEnv.gen_params().exclude(("params", "g"))
        with pytest.raises(KeyError, match=r"missing \['g'\].*gen_params"):
            PendulumEnv(params)

    def test_missing_param_at_reset(self):
        env = PendulumEnv(seed=0)
        with pytest.raises(KeyError, match=r"missing \['dt'\]"):
            env.reset(env.gen_params().exclude(("params", "dt")))

    def test_missing_state_at_step(self):
        env = PendulumEnv(seed=0)
        td = env.reset().exclude("thdot")
        td["action"] = torch.zeros(1)
        with pytest.raises(KeyError, match=r"missing \['thdot'\].*env.reset\(\)"):
            env._step(td)

    @pytest.mark.parametrize(
        "action", [torch.zeros(2), torch.zeros(1, dtype=torch.long)], ids=["shape", "dtype"]
    )
    def test_bad_action(self, action):
        env = PendulumEnv(seed=0)
        td = env.reset()
        td["action"] = action
        with pytest.raises(ValueError, match=r"float tensor of shape \[1\].*action_spec.rand"):
            env._step(td)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
class TestPendulumOnCuda:
    def test_rollout_stays_on_the_device_and_follows_the_cpu_dynamics(self):
        cpu, cuda = PendulumEnv(seed=0), PendulumEnv(seed=0, device="cuda")
        start = cpu.reset(cpu.gen_params(batch_size=[4]))
        actions = torch.linspace(-2, 2, 4).unsqueeze(-1)
        on_cpu = cpu.step(start.clone().set("action", actions))
        on_cuda = cuda.step(start.to("cuda").set("action", actions.to("cuda")))
        assert on_cuda["next", "th"].device.type == "cuda"
        torch.testing.assert_close(on_cuda["next"].cpu(), on_cpu["next"])
        rollout = cuda.rollout(10, tensordict=cuda.reset(cuda.gen_params(batch_size=[4])))
        assert rollout.batch_size == torch.Size([4, 10])
        assert all(value.device.type == "cuda" for value in rollout.values(True, True))
