"""Locking composites: the graph of locked parents that guards nested composites."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from rl_specs import Composite, Unbounded


def chain() -> tuple[Composite, Composite, Composite]:
    """root -> middle -> leaf_holder, each nested composite shared by reference."""
    leaf_holder = Composite(x=Unbounded(shape=(1,)))
    middle = Composite(inner=leaf_holder)
    root = Composite(middle=middle)
    return root, middle, leaf_holder


class TestCompositeLock:
    def test_nested_entries_are_shared_not_copied(self):
        root, middle, leaf_holder = chain()
        assert root["middle"] is middle and root["middle", "inner"] is leaf_holder

    @pytest.mark.parametrize("recurse", [True, False])
    def test_nested_cannot_unlock_while_root_locked(self, recurse):
        root, middle, leaf_holder = chain()
        root.lock_()
        for spec in (middle, leaf_holder):
            with pytest.raises(RuntimeError, match="part of a locked graph"):
                spec.unlock_(recurse=recurse)
            assert spec.is_locked
        with pytest.raises(RuntimeError, match="locked"):
            leaf_holder["y"] = Unbounded(shape=(1,))

    def test_unlocking_root_frees_the_graph(self):
        root, middle, leaf_holder = chain()
        root.lock_()
        root.unlock_()
        assert not (root.is_locked or middle.is_locked or leaf_holder.is_locked)
        leaf_holder["y"] = Unbounded(shape=(1,))
        root.lock_()
        root.unlock_(recurse=False)
        assert middle.is_locked
        middle.unlock_()  # its locking parent is unlocked now
        assert not leaf_holder.is_locked

    def test_spec_shared_by_two_locked_roots_needs_both_unlocked(self):
        root, middle, leaf_holder = chain()
        other = Composite(middle=middle)
        root.lock_()
        other.lock_()
        with pytest.raises(RuntimeError, match="part of a locked graph"):
            root.unlock_()
        # a failed unlock leaves everything locked as it was
        assert root.is_locked and middle.is_locked and leaf_holder.is_locked
        other.unlock_(recurse=False)
        root.unlock_()
        assert not middle.is_locked and other["middle"] is middle

    def test_non_recursive_lock_keeps_nested_free(self):
        root, middle, _ = chain()
        root.lock_(recurse=False)
        assert root.is_locked and not middle.is_locked
        middle["y"] = Unbounded(shape=(1,))

    def test_is_locked_setter_and_locked_alias(self):
        root, middle, _ = chain()
        root.is_locked = True
        assert root.locked and middle.is_locked
        root.is_locked = False
        assert not root.locked and not middle.locked

    def test_clone_is_free(self):
        root, _, _ = chain()
        clone = root.lock_().clone()
        clone["middle", "inner"].unlock_()
        assert not clone.is_locked

    @pytest.mark.parametrize("copier", [lambda s: pickle.loads(pickle.dumps(s)), copy.deepcopy])
    def test_copies_keep_the_lock_graph(self, copier):
        root, _, _ = chain()
        restored = copier(root.lock_())
        assert restored.is_locked and restored["middle", "inner"].is_locked
        with pytest.raises(RuntimeError, match="part of a locked graph"):
            restored["middle"].unlock_()
        restored.unlock_()
        assert not restored["middle", "inner"].is_locked

    def test_stack_locks_its_members(self):
        a, b = Composite(x=Unbounded(shape=(1,))), Composite(y=Unbounded(shape=(1,)))
        stacked = torch.stack([a, b]).lock_()
        assert a.is_locked and b.is_locked
        with pytest.raises(RuntimeError, match="part of a locked graph"):
            a.unlock_()
        stacked.unlock_()
        assert not a.is_locked
