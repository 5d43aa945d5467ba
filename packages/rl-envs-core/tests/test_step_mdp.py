"""step_mdp and terminated_or_truncated."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from rl_envs_core import step_mdp, terminated_or_truncated
from rl_specs import Categorical, Composite


def _ted():
    return TensorDict(
        {
            "obs": torch.zeros(2, 1),
            "action": torch.ones(2, 1),
            "done": torch.zeros(2, 1, dtype=torch.bool),
            "hidden": torch.full((2, 1), 7.0),
            ("agents", "action"): torch.ones(2, 1),
            ("agents", "obs"): torch.zeros(2, 1),
            "next": {
                "obs": torch.ones(2, 1),
                "reward": torch.ones(2, 1),
                "done": torch.tensor([[True], [False]]),
                ("agents", "obs"): torch.ones(2, 1),
                ("agents", "reward"): torch.ones(2, 1),
            },
        },
        [2],
    )


class TestStepMdp:
    def test_next_content_moves_to_root(self):
        out = step_mdp(_ted())
        assert set(out.keys(True, True)) == {"obs", "done", "hidden", ("agents", "obs"),
                                             ("agents", "reward"), ("agents", "action")}
        assert out["obs"].sum() == 2 and out["done"][0].item()

    def test_nested_keys_excluded(self):
        out = step_mdp(_ted(), reward_keys=["reward", ("agents", "reward")],
                       action_keys=["action", ("agents", "action")])
        assert set(out.keys(True, True)) == {"obs", "done", "hidden", ("agents", "obs")}

    @pytest.mark.parametrize(
        "kwargs,present,absent",
        [
            ({"exclude_reward": False}, ["reward"], []),
            ({"exclude_done": True}, [], ["done"]),
            ({"exclude_action": False}, ["action"], []),
            ({"keep_other": False}, ["obs"], ["hidden", "action"]),
            ({"keep_other": False, "exclude_action": False}, ["action"], ["hidden"]),
        ],
    )
    def test_flags(self, kwargs, present, absent):
        out = step_mdp(_ted(), **kwargs)
        for key in present:
            assert key in out.keys()
        for key in absent:
            assert key not in out.keys()

    def test_levels_left_without_entries_are_dropped(self):
        # ``p0`` only held an excluded entry; ``empty`` never held any
        data = TensorDict({"obs": torch.zeros(1), "empty": {},
                           "next": {"obs": torch.ones(1), ("p0", "reward"): torch.ones(1)}}, [])
        out = step_mdp(data, reward_keys=[("p0", "reward")])
        assert set(out.keys()) == {"obs"}

    @pytest.mark.parametrize("keep_other", [True, False])
    def test_nested_levels_keep_their_own_batch_size(self, keep_other):
        data = TensorDict({"next": {}}, [2])
        data["team"] = TensorDict({"action": torch.zeros(2, 3, 1)}, [2, 3])
        data["next", "team"] = TensorDict({"obs": torch.ones(2, 3, 1)}, [2, 3])
        out = step_mdp(data, keep_other=keep_other, exclude_action=False,
                       action_keys=("team", "action"))
        assert out["team"].batch_size == (2, 3)
        assert set(out["team"].keys()) == {"obs", "action"}

    @pytest.mark.parametrize("keep_other", [True, False])
    def test_heterogeneous_lazy_stacks_stay_lazy(self, keep_other):
        members = [
            TensorDict({"action": torch.zeros(n), "tag": torch.zeros(1),
                        "next": {"obs": torch.ones(n), "reward": torch.ones(1)}}, [])
            for n in (1, 2, 3)
        ]
        out = step_mdp(LazyStackedTensorDict.lazy_stack(members), keep_other=keep_other,
                       exclude_action=False)
        assert isinstance(out, LazyStackedTensorDict)
        assert [td["obs"].shape[0] for td in out.tensordicts] == [1, 2, 3]
        assert [td["action"].shape[0] for td in out.tensordicts] == [1, 2, 3]
        assert ("tag" in out.keys()) is keep_other
        assert "reward" not in out.keys()

    def test_non_tensor_entries_are_carried(self):
        data = _ted()
        data["next", "fen"] = NonTensorData("board", batch_size=[2])
        assert step_mdp(data)["fen"] == "board"

    def test_input_is_not_modified(self):
        data = _ted()
        before = {k: v.clone() for k, v in data.items(True, True)}
        keys = set(data.keys(True, True))
        step_mdp(data)
        assert set(data.keys(True, True)) == keys
        assert all(torch.equal(data[k], v) for k, v in before.items())

    def test_next_tensordict_is_updated_in_place(self):
        dest = TensorDict({"other": torch.zeros(2)}, [2])
        out = step_mdp(_ted(), next_tensordict=dest)
        assert out is dest and "obs" in dest.keys() and "other" in dest.keys()

    def test_missing_next_raises(self):
        with pytest.raises(KeyError, match="expected a 'next' entry"):
            step_mdp(TensorDict({"obs": torch.zeros(1)}))


class TestTerminatedOrTruncated:
    def test_aggregates_per_level(self):
        data = TensorDict(
            {
                "terminated": torch.tensor([[False], [True]]),
                "truncated": torch.tensor([[True], [False]]),
                ("agents", "done"): torch.zeros(2, 3, 1, dtype=torch.bool),
            },
            [2],
        )
        assert terminated_or_truncated(data)
        assert data["_reset"].squeeze(-1).tolist() == [True, True]
        assert ("agents", "_reset") not in data.keys(True)

    def test_write_full_false_and_key(self):
        data = TensorDict({"done": torch.zeros(2, 1, dtype=torch.bool)}, [2])
        assert not terminated_or_truncated(data, key="eot", write_full_false=True)
        assert not data["eot"].any()
        assert not terminated_or_truncated(data, key=None)
        assert set(data.keys()) == {"done", "eot"}

    def test_full_done_spec_selects_the_keys(self):
        data = TensorDict({"done": torch.ones(1, dtype=torch.bool),
                           "stop": torch.ones(1, dtype=torch.bool)}, [])
        spec = Composite(stop=Categorical(2, shape=(1,), dtype=torch.bool))
        assert terminated_or_truncated(data, full_done_spec=spec)
        assert data["_reset"].all()
