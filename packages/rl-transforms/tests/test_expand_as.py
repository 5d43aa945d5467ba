"""ExpandAs: broadcast an entry to a reference entry's shape."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_transforms import Compose, ExpandAs, TransformedEnv


def _expand_done():
    return ExpandAs(in_key="done", ref_key=("agents", "observation"), out_key="done_all")


def test_trailing_dims_are_added_then_expanded():
    td = TensorDict(
        {"flag": torch.tensor([[True], [False]]), ("deep", "ref"): torch.zeros(2, 3, 5)}, [2]
    )
    out = ExpandAs("flag", ("deep", "ref"), "wide")(td)
    assert out["wide"].shape == (2, 3, 5)
    assert out["wide"][0].all() and not out["wide"][1].any()


def test_inside_a_compose_and_without_out_key():
    td = TensorDict({"x": torch.arange(3.0), "ref": torch.zeros(3, 2)}, [3])
    out = Compose(ExpandAs("x", "ref"))(td)
    assert out["x"].tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]


def test_env_declares_the_expanded_entry_as_an_observation(marl_env):
    env = TransformedEnv(marl_env(), _expand_done())
    spec = env.observation_spec["done_all"]
    assert spec.shape == (2, 1) and spec.dtype == torch.bool
    check_env_specs(env)
    data = env.rollout(3)
    assert data["next", "done_all"].shape == data["next", "agents", "observation"].shape
    assert data["next", "done_all"][-1].all()


def test_missing_entries_raise():
    with pytest.raises(KeyError, match="ref_key"):
        ExpandAs("x", "ref")(TensorDict({"x": torch.zeros(2)}, [2]))


def test_unknown_spec_key_raises(marl_env):
    with pytest.raises(KeyError, match="ExpandAs expected 'nope'"):
        TransformedEnv(marl_env(), ExpandAs("nope", ("agents", "observation"))).observation_spec
