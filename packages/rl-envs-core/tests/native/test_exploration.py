"""ExplorationType, exploration_type and set_exploration_type."""

from __future__ import annotations

import threading

import pytest
from tensordict.nn.probabilistic import interaction_type  # tensordict 0.14 does not re-export it

from rl_envs_core._native._exploration import (
    ExplorationType,
    exploration_type,
    set_exploration_type,
)


class TestExplorationType:
    def test_members(self):
        assert {m.name for m in ExplorationType} == {
            "RANDOM", "MODE", "MEAN", "MEDIAN", "DETERMINISTIC"
        }

    @pytest.mark.parametrize("text", ["random", "RANDOM", "Random"])
    def test_set_from_string_any_case(self, text):
        with set_exploration_type(text):
            assert exploration_type() is ExplorationType.RANDOM

    def test_bad_value_raises(self):
        with pytest.raises(ValueError, match=r"not a valid"):
            set_exploration_type("greedy")


class TestSetExplorationType:
    def test_context_manager_restores_previous(self):
        assert exploration_type() is None
        with set_exploration_type(ExplorationType.MODE):
            with set_exploration_type(ExplorationType.MEAN):
                assert exploration_type() is ExplorationType.MEAN
            assert exploration_type() is ExplorationType.MODE
        assert exploration_type() is None

    def test_decorator(self):
        @set_exploration_type(ExplorationType.DETERMINISTIC)
        def act():
            return exploration_type()

        assert act() is ExplorationType.DETERMINISTIC
        assert exploration_type() is None

    def test_default_is_deterministic(self):
        with set_exploration_type():
            assert exploration_type() is ExplorationType.DETERMINISTIC

    def test_shared_with_tensordict_interaction_type(self):
        with set_exploration_type("mode"):
            assert interaction_type() is ExplorationType.MODE

    @pytest.mark.parametrize(("thread_local", "seen"), [(False, "random"), (True, None)])
    def test_thread_scope(self, thread_local, seen):
        result = {}

        def read():
            value = exploration_type()
            result["value"] = None if value is None else value.value

        with set_exploration_type("random", thread_local=thread_local):
            worker = threading.Thread(target=read)
            worker.start()
            worker.join()
            assert exploration_type() is ExplorationType.RANDOM
        assert result["value"] == seen
