"""rl_stack.envs and rl_stack.data re-export every public name of the distributions below."""

from __future__ import annotations

import importlib

import pytest

import rl_stack

ENV_SIDE = ("rl_envs_core", "rl_transforms", "rl_batched_envs", "rl_env_adapters")
DATA_SIDE = ("rl_specs", "rl_replay", "rl_datasets")


@pytest.mark.parametrize(
    ("facade", "module_name"),
    [("envs", m) for m in ENV_SIDE] + [("data", m) for m in DATA_SIDE],
)
def test_facade_reexports_the_same_objects(facade, module_name):
    module = importlib.import_module(module_name)
    namespace = getattr(rl_stack, facade)
    for name in module.__all__:
        assert getattr(namespace, name) is getattr(module, name), name
        assert name in namespace.__all__


@pytest.mark.parametrize("facade", ["envs", "data"])
def test_facade_has_no_duplicate_names(facade):
    names = getattr(rl_stack, facade).__all__
    assert len(names) == len(set(names))
