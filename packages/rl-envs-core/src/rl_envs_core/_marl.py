"""Multi-agent grouping: ``MarlGroupMapType`` and ``check_marl_grouping``.

A group map says how agents are gathered in nested entries (``("agents", "action")``):
a dict from group name to the list of agent names in that group.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


class MarlGroupMapType(Enum):
    """Marl Group Map Type.

    How agents are grouped when a multi-agent env builds its nested specs.

    - ``ALL_IN_ONE_GROUP``: every agent in one group named ``"agents"``.
    - ``ONE_GROUP_PER_AGENT``: one group per agent, named after the agent.

    Examples:
        >>> MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(["a", "b"])
        {'agents': ['a', 'b']}
        >>> MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(["a", "b"])
        {'a': ['a'], 'b': ['b']}
    """

    ALL_IN_ONE_GROUP = 1
    ONE_GROUP_PER_AGENT = 2

    def get_group_map(self, agent_names: Sequence[str]) -> dict[str, list[str]]:
        """Build the group map of ``agent_names`` for this grouping type."""
        if self is MarlGroupMapType.ALL_IN_ONE_GROUP:
            return {"agents": list(agent_names)}
        return {name: [name] for name in agent_names}


def check_marl_grouping(group_map: dict[str, list[str]], agent_names: Sequence[str]) -> None:
    """Check MARL group map.

    Every agent must appear in exactly one group, every group must be non-empty
    and name only known agents.

    Args:
        group_map (dict of str to list of str): group name -> agent names.
        agent_names (list of str): the env's agents.

    Raises:
        ValueError: no agents, a repeated agent name, an empty group, an unknown agent, an agent in two
            groups, or an agent in no group (the message names it).

    Examples:
        >>> check_marl_grouping({"team": ["a", "b"]}, ["a", "b"])
        >>> check_marl_grouping({"team": ["a"]}, ["a", "b"])
        Traceback (most recent call last):
        ...
        ValueError: Agent 'b' is in no group of the group map {'team': ['a']}. Add it to one group.
    """
    if not agent_names:
        raise ValueError(
            "check_marl_grouping expected at least one agent name, got none. Pass the "
            "env's agent names."
        )
    known = set(agent_names)
    if len(known) != len(agent_names):
        repeated = sorted({name for name in agent_names if list(agent_names).count(name) > 1})
        raise ValueError(
            f"check_marl_grouping expected distinct agent names, got {repeated} more than "
            f"once in {list(agent_names)}. Give every agent its own name."
        )
    placed: dict[str, str] = {}
    for group, members in group_map.items():
        if not members:
            raise ValueError(
                f"Group {group!r} of the group map is empty. Remove it or add agents to it."
            )
        for agent in members:
            if agent not in known:
                raise ValueError(
                    f"Agent {agent!r} of group {group!r} is not an agent of the env; "
                    f"agents: {list(agent_names)}. Fix the group map."
                )
            if agent in placed:
                raise ValueError(
                    f"Agent {agent!r} is in two groups ({placed[agent]!r} and {group!r}). "
                    f"Put every agent in exactly one group."
                )
            placed[agent] = group
    for agent in agent_names:
        if agent not in placed:
            raise ValueError(
                f"Agent {agent!r} is in no group of the group map {group_map}. Add it to one group."
            )
