"""VecGymEnvTransform on a batched env that resets finished sub-envs inside step."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from rl_env_adapters import VecGymEnvTransform
from rl_envs_core import EnvBase
from rl_specs import Categorical, Composite, Unbounded
from rl_transforms import TransformedEnv

LENGTHS = (2, 3)  # episode length of each sub-env


class SelfResettingEnv(EnvBase):
    """obs = steps since the episode start; resets itself inside step, like SAME_STEP envs."""

    def __init__(self, *, report_final=True):
        super().__init__(batch_size=[2])
        self.report_final = report_final
        obs = {"observation": Unbounded(shape=(2, 1))}
        if report_final:
            obs["final_info"] = Composite(observation=Unbounded(shape=(2, 1)), shape=(2,))
        self.observation_spec = Composite(obs, shape=(2,))
        self.action_spec = Categorical(2, shape=(2, 1))
        self.add_truncated_keys()
        self.t = torch.zeros(2, 1)
        self.limit = torch.tensor(LENGTHS, dtype=torch.float32).unsqueeze(-1)

    def _reset(self, tensordict=None, **kwargs):
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:  # partial resets already happened inside step
            self.t = torch.zeros(2, 1)
        out = {"observation": self.t.clone()}
        if self.report_final:
            out["final_info"] = {"observation": torch.zeros(2, 1)}
        return TensorDict(out, batch_size=[2])

    def _step(self, tensordict):
        self.t = self.t + 1
        done = self.t >= self.limit
        final = self.t.clone()
        self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        out = {
            "observation": self.t.clone(),
            "reward": torch.ones(2, 1),
            "done": done,
            "terminated": done.clone(),
            "truncated": torch.zeros_like(done),
        }
        if self.report_final:
            out["final_info"] = {"observation": final}
        return TensorDict(out, batch_size=[2])

    def _set_seed(self, seed):
        pass


class TestVecGymEnvTransform:
    def test_terminal_observations_in_next(self):
        env = TransformedEnv(SelfResettingEnv(), VecGymEnvTransform())
        data = env.rollout(6, break_when_any_done=False)
        t, t_next = data["observation"].squeeze(-1), data["next", "observation"].squeeze(-1)
        assert torch.equal(t_next, t + 1)  # every transition is a real step
        assert t_next.tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]

    def test_final_entry_is_consumed(self):
        env = TransformedEnv(SelfResettingEnv(), VecGymEnvTransform())
        assert "final_info" not in env.observation_spec.keys()
        assert "final_info" not in env.rollout(3, break_when_any_done=False)["next"].keys()

    def test_missing_final_obs_is_filled(self):
        base = SelfResettingEnv()
        transform = VecGymEnvTransform(missing_obs_value=-1.0)
        out = base._step(TensorDict(batch_size=[2]))
        out = base._step(TensorDict(batch_size=[2]))  # env 0 is done
        out["final_info"] = TensorDict(batch_size=[2])  # reported nothing
        result = transform._step(TensorDict(batch_size=[2]), out)
        assert result["observation"].squeeze(-1).tolist() == [-1.0, 2.0]

    def test_default_fill_is_nan(self):
        assert math.isnan(VecGymEnvTransform().missing_obs_value)

    def test_no_final_entry_passes_through(self):
        data = TensorDict(
            observation=torch.ones(2, 1), done=torch.ones(2, 1, dtype=torch.bool), batch_size=[2]
        )
        out = VecGymEnvTransform()._step(TensorDict(batch_size=[2]), data)
        assert torch.equal(out["observation"], torch.ones(2, 1))

    def test_other_reset_mask_keeps_reset_values(self):
        transform = VecGymEnvTransform()
        base = SelfResettingEnv()
        base._step(TensorDict(batch_size=[2]))
        transform._step(TensorDict(batch_size=[2]), base._step(TensorDict(batch_size=[2])))
        reset = TensorDict(observation=torch.full((2, 1), 7.0), batch_size=[2])
        mask = torch.tensor([[False], [True]])  # not the envs that finished
        out = transform._reset(TensorDict(_reset=mask, batch_size=[2]), reset)
        assert out["observation"].squeeze(-1).tolist() == [7.0, 7.0]
