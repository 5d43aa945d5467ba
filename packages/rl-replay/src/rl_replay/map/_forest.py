"""The :class:`MCTSForest`: rollouts stored once, trees rebuilt from any root.

Two maps hold the data (as in the seeds' "Trees and Forests"): ``data_map``
takes an ``(observation, action)`` pair to its step (the action and the
``"next"`` entries), and ``node_map`` takes an observation to the data-map slots
(``"_index"``) and hashes (``"_hash"``) of the actions taken from it. The forest
also keeps, per data slot, the hash of the next observation, so that building a
tree walks plain dictionaries and reads each vertex's steps from the data
storage in one gather.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase, unravel_key
from tensordict.utils import NestedKey

from rl_replay._multistep import DEFAULT_DONE_KEYS
from rl_replay.map._query import QueryModule
from rl_replay.map._tdmap import TensorDictMap
from rl_replay.map._tree import Tree, _default_format, attach_children
from rl_replay.storages import LazyTensorStorage, ListStorage

__all__ = ["MCTSForest"]


def _key_list(value: NestedKey | Sequence[NestedKey] | None, name: str) -> list[NestedKey] | None:
    if value is None:
        return None
    if isinstance(value, (str, tuple)):
        return [unravel_key(value)]
    if not isinstance(value, list):
        raise ValueError(
            f"MCTSForest expected {name} to be a NestedKey or a list of them, got {value!r}."
        )
    return [unravel_key(k) for k in value]


class MCTSForest:
    """A collection of MCTS trees built from stored rollouts.

    :meth:`extend` stores the steps of a rollout; :meth:`get_tree` rebuilds the
    tree of everything that was played from a root observation. In a compact tree
    (the default) a vertex is where trajectories branch or end and its
    ``rollout`` holds the steps since its parent; otherwise every step is a vertex.

    Keyword Args:
        data_map (TensorDictMap, optional): ``(observation, action) -> step``.
            Defaults to one built at the first :meth:`extend`.
        node_map (TensorDictMap, optional): ``observation -> {"_index", "_hash",
            "count"}``. Defaults to one built at the first :meth:`extend`.
        max_size (int, optional): the capacity of each map. Defaults to ``None``
            (the maps' capacity, or 1,000,000 when the forest builds them).
        done_keys (list of NestedKey, optional): Defaults to
            ``["done", "terminated", "truncated"]``.
        reward_keys (list of NestedKey, optional): Defaults to ``["reward"]``.
        observation_keys (list of NestedKey, optional): the entries that define a
            node. Defaults to ``["observation"]``.
        action_keys (list of NestedKey, optional): Defaults to ``["action"]``.
        excluded_keys (list of NestedKey, optional): entries not stored.
            Defaults to ``None``.
        consolidated (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        ValueError: if ``max_size`` differs from a given map's capacity.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> def rollout(states, action):
        ...     states = torch.tensor(states)
        ...     n = len(states) - 1
        ...     return TensorDict({"observation": states[:-1], "action": torch.full((n,), action),
        ...         "next": {"observation": states[1:], "reward": torch.ones(n, 1),
        ...                  "done": torch.zeros(n, 1, dtype=torch.bool)}}, [n])
        >>> forest = MCTSForest()
        >>> forest.extend(rollout([0, 1, 2, 3], action=0))
        >>> forest.extend(rollout([0, 4, 5], action=1))
        >>> forest.extend(rollout([2, 6], action=2))
        >>> tree = forest.get_tree(TensorDict(observation=torch.tensor(0)))
        >>> print(forest.to_string(TensorDict(observation=torch.tensor(0)),
        ...     lambda t: t.rollout["next", "observation"].tolist()))
        (0,) [1, 2]
         (0, 0) [3]
         (0, 1) [6]
        (1,) [4, 5]
        >>> tree.num_vertices(), tree.max_length()
        (5, 2)
    """

    DEFAULT_MAX_SIZE = 1_000_000

    def __init__(
        self,
        *,
        data_map: TensorDictMap | None = None,
        node_map: TensorDictMap | None = None,
        max_size: int | None = None,
        done_keys: list[NestedKey] | None = None,
        reward_keys: list[NestedKey] | None = None,
        observation_keys: list[NestedKey] | None = None,
        action_keys: list[NestedKey] | None = None,
        excluded_keys: list[NestedKey] | None = None,
        consolidated: bool = False,
    ) -> None:
        for name, given in (("data_map", data_map), ("node_map", node_map)):
            if given is not None and max_size is not None and given.max_size != max_size:
                raise ValueError(
                    f"MCTSForest got max_size={max_size} but {name}.max_size={given.max_size}. "
                    "Pass one of them, or equal values."
                )
        self.data_map = data_map
        self._node_map = node_map
        self._dirty_nodes: dict[int, None] = {}
        self.max_size = max_size
        self.done_keys = done_keys if done_keys is not None else list(DEFAULT_DONE_KEYS)
        self.reward_keys = reward_keys if reward_keys is not None else ["reward"]
        self.observation_keys = (
            observation_keys if observation_keys is not None else ["observation"]
        )
        self.action_keys = action_keys if action_keys is not None else ["action"]
        self.excluded_keys = excluded_keys
        self.consolidated = consolidated
        # per node slot: the data slots of its actions, in the order first seen
        self._edges: list[dict[int, int]] = []
        # per data slot: the hash of its next observation (as a node key)
        self._next_node_hash: list[int] = []

    @property
    def node_map(self) -> TensorDictMap | None:
        """``observation -> {"_index", "_hash", "count"}``: the data-map slots and hashes
        of the actions taken from an observation, and how many there are."""
        if self._dirty_nodes:
            self._write_node_map(list(self._dirty_nodes))
            self._dirty_nodes = {}
        return self._node_map

    @node_map.setter
    def node_map(self, value: TensorDictMap | None) -> None:
        self._node_map = value

    # ------------------------------------------------------------ keys
    def _keys_property(name: str) -> property:
        attr = "_" + name

        def get(self: MCTSForest) -> list[NestedKey] | None:
            return getattr(self, attr)

        def set_(self: MCTSForest, value: Any) -> None:  # Any: a key or list of keys
            setattr(self, attr, _key_list(value, name))

        return property(get, set_, doc=f"The forest's {name.replace('_', ' ')}.")

    done_keys = _keys_property("done_keys")
    reward_keys = _keys_property("reward_keys")
    observation_keys = _keys_property("observation_keys")
    action_keys = _keys_property("action_keys")
    excluded_keys = _keys_property("excluded_keys")
    del _keys_property

    def get_keys_from_env(self, env: Any) -> None:  # Any: an EnvBase (rl_envs_core)
        """Takes the env's done, reward, action and observation keys."""
        self.done_keys = list(env.done_keys)
        self.reward_keys = list(env.reward_keys)
        self.action_keys = list(env.action_keys)
        self.observation_keys = list(env.observation_keys)

    # ------------------------------------------------------------ building the maps
    def _capacity(self) -> int:
        return self.DEFAULT_MAX_SIZE if self.max_size is None else self.max_size

    def _make_maps(self) -> None:
        if self.data_map is None:
            query = QueryModule(in_keys=[*self.observation_keys, *self.action_keys])
            self.data_map = TensorDictMap(
                query_module=query, storage=LazyTensorStorage(self._capacity())
            )
        if self._node_map is None:
            query = QueryModule(in_keys=list(self.observation_keys))
            self._node_map = TensorDictMap(
                query_module=query, storage=ListStorage(self._capacity())
            )
        if self.max_size is None:
            self.max_size = self.data_map.max_size

    def _check_keys(self, rollout: TensorDictBase) -> None:
        keys = set(rollout.keys(True))
        needed = [*self.observation_keys, *self.action_keys, "next"]
        missing = [k for k in needed if k not in keys]
        if missing:
            raise KeyError(
                f"MCTSForest.extend expected a TED rollout with entries {needed}; {missing} are "
                f"missing (found {sorted(map(str, rollout.keys(True, True)))}). Set observation_keys= "
                "and action_keys= to the rollout's keys."
            )

    def extend(self, rollout: TensorDictBase, *, return_node: bool = False) -> Tree | None:
        """Adds the steps of a rollout (a TED, time along its last dim) to the forest.

        Steps already stored (same observation and action) are overwritten, so
        extending twice with one rollout changes nothing.

        Args:
            rollout (TensorDictBase): the steps, with observation, action and ``"next"``.

        Keyword Args:
            return_node (bool, optional): return the tree rooted at the rollout's
                first observation. Defaults to ``False``.

        Raises:
            KeyError: if an observation or action entry, or ``"next"``, is missing.
        """
        self._check_keys(rollout)
        if not rollout.batch_dims:
            rollout = rollout.unsqueeze(0)
        steps = rollout.reshape(-1)
        self._make_maps()
        source = steps.exclude("next")
        dest = steps.select("next", *self.action_keys)
        if self.excluded_keys:
            dest = dest.exclude(*self.excluded_keys)
            dest = dest.exclude(*[("next", *_as_tuple(k)) for k in self.excluded_keys])
        data_query = self.data_map.query_module(source, extend=True, clone=True)
        data_index, data_hash = (
            data_query.get(self.data_map.index_key),
            data_query.get(self.data_map.query_module.hash_key),
        )
        self.data_map[data_index] = dest
        node_query = self._node_map.query_module
        node_index = node_query(source, extend=True, write_hash=False, clone=True).get(
            self._node_map.index_key
        )
        next_hash = node_query.hash(steps.get("next"))
        for slot, h in zip(data_index.tolist(), next_hash.tolist(), strict=True):
            if slot >= len(self._next_node_hash):
                self._next_node_hash.extend([0] * (slot + 1 - len(self._next_node_hash)))
            self._next_node_hash[slot] = h
        # the node map's values are written when it is next read (see node_map)
        dirty = self._dirty_nodes
        for node, slot, h in zip(
            node_index.tolist(), data_index.tolist(), data_hash.tolist(), strict=True
        ):
            while node >= len(self._edges):
                self._edges.append({})
            self._edges[node].setdefault(slot, h)
            dirty[node] = None
        if return_node:
            return self.get_tree(steps[0])
        return None

    def add(self, step: TensorDictBase, *, return_node: bool = False) -> Tree | None:
        """Adds one step (see :meth:`extend`)."""
        return self.extend(step, return_node=return_node)

    def _write_node_map(self, nodes: list[int]) -> None:
        if not nodes:
            return
        values = []
        for node in nodes:
            edges = self._edges[node]
            values.append(
                TensorDict(
                    {
                        "_index": torch.tensor(list(edges), dtype=torch.int64),
                        "_hash": torch.tensor(list(edges.values()), dtype=torch.int64),
                        "count": torch.tensor(len(edges), dtype=torch.int32),
                    },
                    batch_size=[],
                )
            )
        self._node_map.storage.set(nodes, values)
        self._node_map._mark_written(torch.tensor(nodes, dtype=torch.int64))

    # ------------------------------------------------------------ trees
    def _node_of(self, data: TensorDictBase) -> int:
        index = self._node_map.query_module(
            data.unsqueeze(0) if not data.batch_dims else data,
            extend=False,
            write_hash=False,
            clone=True,
        ).get(self._node_map.index_key)
        return int(index.reshape(-1)[0])

    def _walk(self, slot: int, compact: bool) -> tuple[list[int], int]:
        """Follows edge ``slot``: the data slots of the walk and the node it ends on (-1: unknown)."""
        lookup = self._node_map.query_module.hash_to_int._index
        chain = [slot]
        while True:
            node = lookup.get(self._next_node_hash[chain[-1]], -1)
            if node < 0 or node >= len(self._edges):
                return chain, -1
            edges = self._edges[node]
            if not compact or len(edges) != 1:
                return chain, node
            nxt = next(iter(edges))
            if nxt in chain:  # a loop of single edges: stop where it closes
                return chain, node
            chain.append(nxt)

    def _rollouts(
        self, chains: list[list[int]], starts: list[TensorDictBase]
    ) -> list[TensorDictBase]:
        """The steps of several walks, read with one gather: one TED per walk."""
        flat = [slot for chain in chains for slot in chain]
        steps = self.data_map.storage.get(torch.tensor(flat, dtype=torch.int64))  # a copy
        nxt = steps.get("next")
        lengths = [len(chain) for chain in chains]
        # the observation of a step is the next one of the step before (the start for the first)
        firsts = torch.zeros(len(flat), dtype=torch.bool)
        offsets = torch.tensor([0, *lengths[:-1]]).cumsum(0)
        firsts[offsets] = True
        for key in self.observation_keys:
            following = nxt.get(key)
            current = torch.empty_like(following)
            current[1:] = following[:-1]
            current[firsts] = torch.stack([start.get(key).to(following.dtype) for start in starts])
            steps.set(key, current)
        if len(chains) == 1:
            return [steps]
        bounds = [0, *torch.tensor(lengths).cumsum(0).tolist()]
        return [steps[start:stop] for start, stop in itertools.pairwise(bounds)]

    def get_tree(
        self,
        root: TensorDictBase,
        *,
        max_depth: int | None = None,
        compact: bool = True,
    ) -> Tree:
        """The tree of everything stored from the observation of ``root``.

        Args:
            root (TensorDictBase): holds the observation entries of the root.

        Keyword Args:
            max_depth (int, optional): stop expanding below this depth. Defaults
                to ``None`` (the whole tree).
            compact (bool, optional): one vertex per branching (``True``) or per
                step. Defaults to ``True``.

        Raises:
            KeyError: if the root observation was never stored.
        """
        if self._node_map is None:
            raise KeyError("MCTSForest is empty: extend it with rollouts before asking for a tree.")
        node_data = root.select(*self.observation_keys)
        node = self._node_of(node_data)
        if node < 0 or node >= len(self._edges):
            raise KeyError(
                f"MCTSForest has no node for this root (observation keys {self.observation_keys}). "
                "Pass an observation of a stored rollout."
            )
        edges = self._edges[node]
        tree = Tree(
            count=torch.zeros((), dtype=torch.int32),
            wins=torch.zeros(()),
            index=torch.tensor(list(edges), dtype=torch.int64),
            node_id=0,
            node_data=node_data,
        )
        if len(edges) == 1:  # the root takes its single action along
            chain, node = self._walk(next(iter(edges)), compact)
            tree.rollout = self._rollouts([chain], [node_data])[0]
            tree.node_data = tree.rollout[-1]["next"].select(*self.observation_keys)
            edges = self._edges[node] if node >= 0 else {}
            tree.index = torch.tensor(list(edges), dtype=torch.int64)
        counter = 1
        memo: dict[int, Tree] = {}
        queue: deque[tuple[Tree, dict[int, int], int]] = deque()
        if edges:
            queue.append((tree, edges, 0))
        while queue:
            parent, edges, depth = queue.popleft()
            new = [(slot, h) for slot, h in edges.items() if h not in memo]
            walks = [self._walk(slot, compact) for slot, _ in new]
            rollouts = (
                self._rollouts([c for c, _ in walks], [parent.node_data] * len(new)) if new else []
            )
            for (_, h), (_, node), rollout in zip(new, walks, rollouts, strict=True):
                child_edges = self._edges[node] if node >= 0 else {}
                child = Tree(
                    count=torch.zeros((), dtype=torch.int32),
                    wins=torch.zeros(()),
                    index=torch.tensor(list(child_edges), dtype=torch.int64),
                    hash=h,
                    node_id=counter,
                    rollout=rollout,
                    node_data=rollout[-1]["next"].select(*self.observation_keys),
                )
                counter += 1
                memo[h] = child
                if child_edges and (max_depth is None or depth + 1 < max_depth):
                    queue.append((child, child_edges, depth + 1))
            attach_children(parent, [memo[h] for h in edges.values()])
        return tree

    def get_child(self, root: TensorDictBase) -> TensorDictBase:
        """The stored steps of ``root``'s ``(observation, action)`` pairs."""
        return self.data_map[root]

    @classmethod
    def valid_paths(cls, tree: Tree) -> Any:  # Any: an iterator of paths
        """Yields the leaf paths of ``tree``."""
        yield from tree.valid_paths()

    def __len__(self) -> int:
        return 0 if self.data_map is None else len(self.data_map)

    def to_string(
        self, td_root: TensorDictBase, node_format_fn: Callable[[Tree], Any] = _default_format
    ) -> str:
        """The :meth:`Tree.to_string` of the tree rooted at ``td_root``."""
        return self.get_tree(td_root).to_string(node_format_fn)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)
