"""Tree and MCTSForest: building, traversal, rollouts, strings and errors."""

from __future__ import annotations

import builtins

import pytest
import torch
from tensordict import TensorDict

from rl_replay import MCTSForest, Tree


def _rollout(states, action):
    states = torch.tensor(states)
    n = len(states) - 1
    actions = torch.full((n,), float(action)) + torch.arange(n) / 10
    return TensorDict(
        {
            "observation": states[:-1],
            "action": actions,
            "done": torch.zeros(n, 1, dtype=torch.bool),
            "next": {
                "observation": states[1:],
                "reward": torch.full((n, 1), float(action)),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        [n],
    )


def _forest():
    # 0 -a0-> 1 -> 2 -> 3 (branches: a0 -> 4 -> 5, a1 -> 6 -> 7) ; 0 -a2-> 8 -> 9
    forest = MCTSForest()
    for states, action in (([0, 1, 2, 3, 4, 5], 0), ([3, 6, 7], 1), ([0, 8, 9], 2)):
        forest.extend(_rollout(states, action))
    return forest


ROOT = TensorDict(observation=torch.tensor(0))


def _node(obs, node_id, h=None):
    return Tree(node_data=TensorDict(obs=torch.tensor(obs)), hash=h, node_id=node_id)


class TestTree:
    def _tree(self):
        root = _node(0, 0, h=100)
        root.subtree = TensorDict.lazy_stack([_node(1, 1, 101), _node(2, 2, 102)])
        root.subtree[0].subtree = TensorDict.lazy_stack([_node(3, 3, 103), _node(4, 4, 104)])
        return root

    def test_shape_queries(self):
        tree = self._tree()
        assert tree.num_children == 2 and tree.num_vertices() == 5
        assert set(tree.edges()) == {(0, 1), (0, 2), (1, 3), (1, 4)}
        assert list(tree.valid_paths()) == [(1,), (0, 0), (0, 1)]
        assert tree.max_length() == 2
        assert tree.get_vertex_by_id(4).node_data["obs"].item() == 4
        assert tree.get_vertex_by_hash(103).node_id == 3

    def test_vertices_by_key_type(self):
        tree = self._tree()
        assert set(tree.vertices(key_type="path")) == {(), (0,), (1,), (0, 0), (0, 1)}
        assert set(tree.vertices(key_type="id")) == {0, 1, 2, 3, 4}
        with pytest.raises(ValueError, match="key_type must be"):
            tree.vertices(key_type="name")

    def test_children_know_their_parent(self):
        tree = self._tree()
        assert tree.subtree[0].subtree[1].parent.node_id == 1
        assert tree.parent is None

    def test_contains(self):
        tree = self._tree()
        inner = tree.subtree[0]
        assert inner in tree and tree not in inner

    def test_missing_vertex_raises(self):
        with pytest.raises(ValueError, match="node_id=9"):
            self._tree().get_vertex_by_id(9)

    def test_make_node_from_a_step(self):
        step = _rollout([0, 1], 0)[0]
        node = Tree.make_node(step)
        assert node.rollout.shape == (1,) and node.num_children == 1
        assert node.node_data["observation"].item() == 0

    def test_to_plain_tensordict(self):
        plain = self._tree().to_tensordict()
        assert plain["subtree", "node_data", "obs"].tolist() == [1, 2]

    def test_plot_other_backend_raises(self):
        with pytest.raises(NotImplementedError, match="backend='plotly'"):
            self._tree().plot(backend="matplotlib")

    def test_plot_without_plotly_names_the_install(self, monkeypatch):
        real_import = builtins.__import__

        def no_plotly(name, *args, **kwargs):
            if name.startswith("plotly"):
                raise ImportError(name)
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_plotly)
        with pytest.raises(ImportError, match="pip install plotly"):
            self._tree().plot()


class TestMCTSForest:
    def test_compact_tree_has_a_vertex_per_branching(self):
        tree = _forest().get_tree(ROOT)
        # root(0); 0->...->3 ; 3->4->5 ; 3->6->7 ; 0->8->9
        assert tree.num_vertices() == 5
        first = tree.subtree[0]
        assert first.rollout["next", "observation"].tolist() == [1, 2, 3]
        assert first.rollout["observation"].tolist() == [0, 1, 2]
        assert first.num_children == 2

    def test_full_tree_has_a_vertex_per_step(self):
        tree = _forest().get_tree(ROOT, compact=False)
        assert tree.num_vertices() == 1 + 5 + 2 + 2

    def test_rollout_from_path_rebuilds_the_rollout(self):
        tree = _forest().get_tree(ROOT)
        full = tree.rollout_from_path((0, 0))
        expected = _rollout([0, 1, 2, 3, 4, 5], 0)
        for key in ("observation", "action", ("next", "observation"), ("next", "reward")):
            assert torch.equal(full[key], expected[key]), key
        with pytest.raises(IndexError, match="leaves the tree at depth 1"):
            tree.rollout_from_path((0, 5))

    def test_ids_are_breadth_first_and_hashes_unique(self):
        tree = _forest().get_tree(ROOT)
        assert [tree.get_vertex_by_id(i).node_id for i in range(5)] == list(range(5))
        hashes = {v.hash for v in tree.vertices().values() if v.hash is not None}
        assert len(hashes) == 4 and tree.hash is None

    def test_single_action_root_takes_its_rollout(self):
        forest = MCTSForest()
        forest.extend(_rollout([5, 6, 7, 8], 0))
        tree = forest.get_tree(TensorDict(observation=torch.tensor(5)), compact=False)
        assert tree.rollout.shape == (1,) and tree.max_length() == 2

    def test_rebranching_reuses_vertices(self):
        forest = _forest()
        forest.extend(_rollout([9, 2], 7))  # 9 -> 2 joins the first branch
        tree = forest.get_tree(ROOT)
        assert forest.get_tree(TensorDict(observation=torch.tensor(2))) in tree
        assert tree.num_vertices(count_repeat=True) > tree.num_vertices()

    def test_max_depth_stops_expansion(self):
        tree = _forest().get_tree(ROOT, max_depth=1)
        assert tree.max_length() == 1

    def test_extending_twice_changes_nothing(self):
        forest = _forest()
        before = len(forest)
        forest.extend(_rollout([0, 8, 9], 2))
        assert len(forest) == before
        assert forest.get_tree(ROOT).num_vertices() == 5

    def test_seed_node_and_data_maps(self):
        # 002, "MCTSForest" (data_21, data_22)
        forest = _forest()
        data = TensorDict(observation=torch.tensor(0))
        metadata = forest.node_map[data]
        index = metadata["_index"]
        assert index.numel() == 2 and metadata["count"].item() == 2
        next_data = forest.data_map[index]
        assert next_data["next", "observation"].tolist() == [1, 8]

    def test_to_string(self):
        text = _forest().to_string(ROOT, lambda t: t.rollout["next", "observation"].tolist())
        assert text.splitlines() == [
            "(0,) [1, 2, 3]",
            " (0, 0) [4, 5]",
            " (0, 1) [6, 7]",
            "(1,) [8, 9]",
        ]

    def test_done_and_reward_keys(self):
        forest = MCTSForest(done_keys="done", reward_keys=[("next", "reward")])
        assert forest.done_keys == ["done"] and forest.reward_keys == [("next", "reward")]
        assert MCTSForest().done_keys == ["done", "terminated", "truncated"]

    def test_unknown_root_raises(self):
        with pytest.raises(KeyError, match="no node for this root"):
            _forest().get_tree(TensorDict(observation=torch.tensor(42)))
        with pytest.raises(KeyError, match="empty"):
            MCTSForest().get_tree(ROOT)

    def test_rollout_without_action_raises(self):
        with pytest.raises(KeyError, match="are missing"):
            MCTSForest().extend(_rollout([0, 1], 0).exclude("action"))

    def test_conflicting_max_size_raises(self):
        data_map = MCTSForest()
        data_map.extend(_rollout([0, 1], 0))
        with pytest.raises(ValueError, match="max_size=10"):
            MCTSForest(data_map=data_map.data_map, max_size=10)
