"""check_env_specs: a clear report of which key mismatched, expected vs got."""

from __future__ import annotations

import pytest
import torch

from rl_envs_core import check_env_specs
from rl_envs_core.testing import CountingEnv
from rl_specs import Bounded, Composite


class ResetEdited(CountingEnv):
    def __init__(self, edit, **kwargs):
        super().__init__(**kwargs)
        self.edit = edit

    def _reset(self, tensordict=None, **kwargs):
        return self.edit(super()._reset(tensordict))


class TestCheckEnvSpecs:
    @pytest.mark.parametrize("batch_size", [(), (2,), (2, 3)])
    @pytest.mark.parametrize("break_when_any_done", [False, True, "both"])
    def test_passes_on_a_correct_env(self, batch_size, break_when_any_done):
        env = CountingEnv(max_steps=2, batch_size=batch_size)
        assert check_env_specs(env, break_when_any_done=break_when_any_done) is None

    def test_lazy_rollout_and_seed(self):
        env = CountingEnv()
        check_env_specs(env, return_contiguous=False, seed=3)
        assert env.seed == 3

    def test_given_tensordict_is_not_modified(self):
        env = CountingEnv(max_steps=10)
        start = env.reset()
        check_env_specs(env, tensordict=start)
        assert "next" not in start.keys()

    def test_dtype_mismatch_names_key(self):
        env = ResetEdited(lambda td: td.set("observation", td["observation"].double()))
        with pytest.raises(AssertionError, match=r"dtype mismatch at root key 'observation' "
                           r"\(step 0\): the spec expects torch.float32, the data has "
                           r"torch.float64"):
            check_env_specs(env)
        check_env_specs(env, check_dtype=False)

    def test_shape_mismatch_names_key(self):
        env = ResetEdited(lambda td: td.set("observation", torch.zeros(2, 2)), batch_size=[2])
        with pytest.raises(AssertionError, match=r"shape mismatch at root key 'observation' "
                           r"\(step 0\): the spec expects \(2, 1\), the data has \(2, 2\)"):
            check_env_specs(env)

    def test_undeclared_key_names_key(self):
        env = ResetEdited(lambda td: td.set("extra", torch.zeros(())))
        with pytest.raises(AssertionError, match=r"in the data only: \['extra'\]"):
            check_env_specs(env)

    def test_missing_key_names_key(self):
        env = ResetEdited(lambda td: td.exclude("observation"))
        with pytest.raises(AssertionError, match=r"in the specs only: \['observation'\]"):
            check_env_specs(env)

    def test_value_outside_domain(self):
        env = CountingEnv(max_steps=10)
        env.observation_spec = Composite(observation=Bounded(low=0.0, high=1.5, shape=(1,)))
        with pytest.raises(AssertionError, match=r"out of the spec's domain at 'next' key "
                           r"'observation' \(step 1\)"):
            check_env_specs(env)


def test_actions_drawn_under_an_earlier_mask_pass_the_domain_check():
    from tensordict import TensorDict

    from rl_envs_core import EnvBase, check_env_specs
    from rl_specs import Categorical, Composite, Unbounded

    class MovingMask(EnvBase):
        """Allows only action ``t % 3`` at step ``t`` and narrows its own action spec."""

        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(obs=Unbounded(shape=(1,)))
            self.action_spec = Categorical(3, shape=())
            self.reward_spec = Unbounded(shape=(1,))
            self.t = 0

        def _allow(self):
            mask = torch.zeros(3, dtype=torch.bool)
            mask[self.t % 3] = True
            self.action_spec.update_mask(mask)

        def _reset(self, tensordict=None):
            self.t = 0
            self._allow()
            return TensorDict(obs=torch.zeros(1))

        def _step(self, tensordict):
            self.t += 1
            self._allow()
            return TensorDict(obs=torch.zeros(1), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))

        def _set_seed(self, seed):
            return seed

    check_env_specs(MovingMask())
