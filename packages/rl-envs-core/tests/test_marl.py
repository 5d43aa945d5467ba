"""MarlGroupMapType and check_marl_grouping."""

from __future__ import annotations

import pytest

from rl_envs_core import MarlGroupMapType, check_marl_grouping


class TestMarlGroupMapType:
    @pytest.mark.parametrize(
        "kind,expected",
        [
            (MarlGroupMapType.ALL_IN_ONE_GROUP, {"agents": ["a", "b"]}),
            (MarlGroupMapType.ONE_GROUP_PER_AGENT, {"a": ["a"], "b": ["b"]}),
        ],
    )
    def test_get_group_map(self, kind, expected):
        group_map = kind.get_group_map(["a", "b"])
        assert group_map == expected
        check_marl_grouping(group_map, ["a", "b"])


class TestCheckMarlGrouping:
    @pytest.mark.parametrize(
        "group_map,agents,match",
        [
            ({"g": ["a"]}, [], "at least one agent"),
            ({"g": []}, ["a"], "Group 'g' of the group map is empty"),
            ({"g": ["a", "z"]}, ["a"], "Agent 'z' of group 'g' is not an agent"),
            ({"g": ["a"], "h": ["a"]}, ["a"], r"in two groups \('g' and 'h'\)"),
            ({"g": ["a"]}, ["a", "b"], "Agent 'b' is in no group"),
            ({"a": ["a"]}, ["a", "a"], r"distinct agent names, got \['a'\]"),
        ],
    )
    def test_bad_group_maps_raise(self, group_map, agents, match):
        with pytest.raises(ValueError, match=match):
            check_marl_grouping(group_map, agents)

    def test_valid_group_map_passes(self):
        assert check_marl_grouping({"red": ["a"], "blue": ["b", "c"]}, ["a", "b", "c"]) is None


@pytest.mark.parametrize("kind", list(MarlGroupMapType))
def test_group_maps_of_repeated_names_are_rejected_whatever_the_grouping(kind):
    with pytest.raises(ValueError, match="distinct agent names"):
        check_marl_grouping(kind.get_group_map(["x", "x"]), ["x", "x"])
