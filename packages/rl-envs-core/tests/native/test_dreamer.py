"""DreamerEnv and DreamerDecoder."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_envs_core._native._dreamer import DreamerDecoder, DreamerEnv
from rl_envs_core.testing import EnvContract
from rl_specs import Bounded, Composite, Unbounded


def _prior():
    return TensorDictModule(
        lambda state, belief, action: (state * 0.5 + action, belief + 1, state.sum(-1, keepdim=True)),
        in_keys=["state", "belief", "action"],
        out_keys=["state", "belief", "reward"],
    )


def _decoder():
    return TensorDictModule(lambda s, b: torch.cat([s, b], -1), in_keys=["state", "belief"], out_keys=["pixels"])


def _env(batch_size=(), **kwargs):
    env = DreamerEnv(_prior(), prior_shape=(2,), belief_shape=(3,), batch_size=batch_size, **kwargs)
    env.action_spec = Bounded(-1.0, 1.0, shape=(*batch_size, 2))
    return env


class TestDreamerEnv(EnvContract):
    def make_env(self):
        return _env(batch_size=(2,))

    def test_default_specs_from_shapes(self):
        env = _env(batch_size=(4,))
        assert env.observation_spec["state"].shape == torch.Size([4, 2])
        assert env.observation_spec["belief"].shape == torch.Size([4, 3])
        assert set(env.state_spec.keys()) == {"state", "belief"}
        assert (env.prior_shape, env.belief_shape) == ((2,), (3,))

    def test_reset_from_posterior(self):
        env = _env(batch_size=(2,))
        start = TensorDict(state=torch.ones(2, 2), belief=torch.zeros(2, 3), batch_size=[2])
        td = env.reset(start)
        assert torch.equal(td["state"], start["state"])
        td["state"].zero_()
        assert start["state"].eq(1).all()

    def test_reset_samples_when_empty(self):
        td = _env(batch_size=(3,)).reset()
        assert td["state"].shape == torch.Size([3, 2]) and td["belief"].shape == torch.Size([3, 3])

    def test_imagined_rollout(self):
        env = _env(batch_size=(2,))
        start = TensorDict(state=torch.zeros(2, 2), belief=torch.zeros(2, 3), batch_size=[2])
        data = env.rollout(4, tensordict=env.reset(start))
        assert data.batch_size == torch.Size([2, 4])
        assert data["next", "belief"][:, -1].eq(4).all()

    def test_decode_obs(self):
        env = _env(obs_decoder=_decoder())
        td = TensorDict(state=torch.ones(2), belief=torch.zeros(3), action=torch.ones(2))
        assert env.decode_obs(td.clone())["pixels"].tolist() == [1, 1, 0, 0, 0]
        decoded = env.decode_obs(td.clone(), compute_latents=True)
        assert decoded["pixels"].tolist() == [1.5, 1.5, 1, 1, 1]

    def test_decode_obs_without_decoder(self):
        with pytest.raises(ValueError, match=r"obs_decoder=None.*obs_decoder=decoder"):
            _env().decode_obs(TensorDict())

    def test_set_specs_from_env(self):
        source = _env(batch_size=(2,))
        target = DreamerEnv(_prior(), prior_shape=(2,), belief_shape=(3,), batch_size=(2,))
        target.set_specs_from_env(source)
        assert target.action_spec == source.action_spec
        assert set(target.state_spec.keys()) == {"state", "belief"}

    def test_set_specs_from_env_needs_latents(self):
        source = _env()
        source.observation_spec = Composite(observation=Unbounded((2,)))
        with pytest.raises(KeyError, match=r"missing \['state', 'belief'\]"):
            _env().set_specs_from_env(source)


class TestDreamerDecoder:
    def test_decodes_through_parent(self):
        env = _env(obs_decoder=_decoder())
        record = DreamerDecoder()
        record.set_container(env)
        out = record(TensorDict(state=torch.ones(2), belief=torch.ones(3)))
        assert out["pixels"].tolist() == [1.0] * 5

    def test_looks_through_base_env(self):
        class Wrapper:
            base_env = _env(obs_decoder=_decoder())

        record = DreamerDecoder()
        record.parent = Wrapper()
        reset = TensorDict(state=torch.zeros(2), belief=torch.zeros(3))
        assert record._reset(TensorDict(), reset)["pixels"].shape == torch.Size([5])
        assert record._step(TensorDict(), reset.clone())["pixels"].shape == torch.Size([5])

    def test_spec_passes_through(self):
        spec = Composite(state=Unbounded((2,)))
        assert DreamerDecoder().transform_observation_spec(spec) is spec

    @pytest.mark.parametrize("with_parent", [False, True])
    def test_needs_parent_with_decoder(self, with_parent):
        record = DreamerDecoder()
        if with_parent:
            record.set_container(_env())
        with pytest.raises(RuntimeError, match=r"needs a parent DreamerEnv with an obs_decoder"):
            record(TensorDict(state=torch.zeros(2)))
