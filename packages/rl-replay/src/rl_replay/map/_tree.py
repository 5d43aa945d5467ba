"""The :class:`Tree` of a search: a tensorclass whose ``subtree`` is a stack of trees."""

from __future__ import annotations

import importlib
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, tensorclass

from rl_replay import _td

__all__ = ["Tree"]

PLOTLY_INSTALL = "pip install plotly"


def _default_format(tree: Tree) -> Any:  # Any: whatever is printed
    return tree.node_data.to_dict()


@tensorclass(nocast=True)
class Tree:
    """A tree (or a vertex of one) of a Monte Carlo Tree Search.

    A vertex is where a trajectory branches: ``node_data`` holds the data that
    defines it (the observation), ``rollout`` the TED steps that led to it from
    its parent (``None`` at a root), ``hash`` the hash of the ``(observation,
    action)`` pair that starts that rollout, and ``subtree`` the stack of its
    children (``None`` at a leaf). Trees are usually built by
    :meth:`MCTSForest.get_tree`.

    Attributes:
        count (Tensor): visits of the vertex.
        wins (Tensor): accumulated value of the vertex.
        index (Tensor): data-map slots of the vertex's outgoing edges.
        hash (int): the hash of the edge that leads to the vertex (``None`` at a root).
        node_id (int): a unique id within the tree (breadth-first order).
        rollout (TensorDict): the TED steps from the parent to this vertex.
        node_data (TensorDict): the data defining the vertex.
        subtree (Tree): the stacked children.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> leaf = lambda i: Tree(node_data=TensorDict(obs=torch.tensor(i)), hash=i, node_id=i)
        >>> root = Tree(node_data=TensorDict(obs=torch.tensor(0)), node_id=0)
        >>> root.subtree = TensorDict.lazy_stack([leaf(1), leaf(2)])
        >>> root.num_children, root.num_vertices(), root.edges()
        (2, 3, [(0, 1), (0, 2)])
        >>> list(root.valid_paths())
        [(0,), (1,)]
    """

    count: torch.Tensor | None = None
    wins: torch.Tensor | None = None
    index: torch.Tensor | None = None
    hash: int | None = None  # None at a root
    node_id: int | None = None
    rollout: TensorDict | None = None
    node_data: TensorDict | None = None
    subtree: Tree | None = None  # a stack of Tree
    _parent: Any = None  # Any: a weakref to the parent's tensordict
    specs: Any = None  # Any: a Composite of env specs

    @classmethod
    def make_node(
        cls,
        data: TensorDictBase,
        *,
        device: torch.device | None = None,
        batch_size: torch.Size | None = None,
        specs: Any = None,  # Any: a Composite of env specs
    ) -> Tree:
        """Creates a vertex from ``data``: a TED step/rollout (with ``"next"``) or node data.

        Args:
            data (TensorDictBase): the node data, or a rollout whose last next
                state becomes the only child.

        Keyword Args:
            device (torch.device, optional): Defaults to ``data.device``.
            batch_size (torch.Size, optional): Defaults to ``[]``.
            specs (Composite, optional): Defaults to ``None``.
        """
        rollout, subtree = None, None
        if "next" in data.keys():
            rollout = data if data.batch_dims else data.unsqueeze(0)
            subtree = TensorDict.lazy_stack([cls.make_node(rollout["next"][..., -1])])
        return cls(
            count=torch.zeros(()),
            wins=torch.zeros(()),
            node_data=data.exclude("action", "next"),
            rollout=rollout,
            subtree=subtree,
            specs=specs,
            device=data.device if device is None else device,
            batch_size=batch_size or [],
        )

    # ------------------------------------------------------------ views of the data
    @property
    def parent(self) -> Tree | None:
        """The parent vertex (``None`` at a root or once the parent is gone)."""
        ref = self._parent
        if ref is None:
            return None
        data = ref()
        return None if data is None else type(self)._from_tensordict(data)

    @property
    def num_children(self) -> int:
        """Number of children (the length of the ``subtree`` stack)."""
        return len(self.subtree) if self.subtree is not None else 0

    @property
    def is_terminal(self) -> bool | torch.Tensor:
        """Whether the rollout leading here ended on a done state."""
        if self.rollout is None or ("next", "done") not in self.rollout.keys(True):
            return False
        return self.rollout[..., -1]["next", "done"].squeeze(-1)

    @property
    def selected_actions(self) -> torch.Tensor | TensorDictBase | None:
        """The first action of every child's rollout."""
        if self.subtree is None:
            return None
        return self.subtree.rollout[..., 0]["action"]

    @property
    def prev_action(self) -> torch.Tensor | TensorDictBase | None:
        """The action taken just before this vertex's observation (``None`` at a root)."""
        return None if self.rollout is None else self.rollout[..., -1]["action"]

    @property
    def branching_action(self) -> torch.Tensor | TensorDictBase | None:
        """The action that branched to this vertex from its parent (``None`` at a root)."""
        return None if self.rollout is None else self.rollout[..., 0]["action"]

    @property
    def node_observation(self) -> torch.Tensor | TensorDictBase:
        """The ``"observation"`` entry of the node data."""
        return self.node_data["observation"]

    @property
    def node_observations(self) -> TensorDictBase:
        """The node data's ``"observation"`` entry as a tensordict."""
        return self.node_data.select("observation")

    @property
    def visits(self) -> Any:  # Any: the count field
        """Alias of ``count``."""
        return self.count

    @visits.setter
    def visits(self, value: Any) -> None:
        self.count = value

    # ------------------------------------------------------------ traversal
    def _children(self) -> list[Tree]:
        subtree = self.subtree
        return [] if subtree is None else [subtree[i] for i in range(len(subtree))]

    def _walk(self) -> Iterator[tuple[Tree, tuple[int, ...]]]:
        queue: deque[tuple[Tree, tuple[int, ...]]] = deque([(self, ())])
        while queue:
            tree, path = queue.popleft()
            yield tree, path
            for i, child in enumerate(tree._children()):
                queue.append((child, (*path, i)))

    def vertices(
        self, *, key_type: Literal["id", "hash", "path"] = "hash"
    ) -> dict[Any, Tree]:  # Any: an id, a hash or a path
        """Maps every vertex by ``key_type``: ``"id"``, ``"hash"`` (unique vertices,
        keyed by node id) or ``"path"`` (every path, repeats included).

        Raises:
            ValueError: for another ``key_type``.
        """
        if key_type not in ("id", "hash", "path"):
            raise ValueError(f"key_type must be one of 'id', 'hash' or 'path', got {key_type!r}.")
        out: dict[Any, Tree] = {}
        seen: set[Any] = set()
        queue: deque[tuple[Tree, tuple[int, ...]]] = deque([(self, ())])
        while queue:
            tree, path = queue.popleft()
            if key_type == "path":
                out[path] = tree
            else:
                mark = (tree.hash, tree.node_id)
                if mark in seen:
                    continue
                seen.add(mark)
                out[tree.node_id] = tree
            for i, child in enumerate(tree._children()):
                queue.append((child, (*path, i)))
        return out

    def num_vertices(self, *, count_repeat: bool = False) -> int:
        """The number of vertices; with ``count_repeat`` a vertex reached by several
        paths counts once per path."""
        if count_repeat:
            return len(self.vertices(key_type="path"))
        return len({v.node_id for v in self.vertices(key_type="id").values()})

    def get_vertex_by_id(self, id: int) -> Tree:
        """The vertex whose ``node_id`` is ``id``.

        Raises:
            ValueError: if no vertex has that id.
        """
        for tree, _ in self._walk():
            if tree.node_id == id:
                return tree
        raise ValueError(
            f"Tree has no vertex with node_id={id}; ids run 0..{self.num_vertices() - 1}."
        )

    def get_vertex_by_hash(self, hash: int) -> Tree:
        """The vertex whose ``hash`` is ``hash``.

        Raises:
            ValueError: if no vertex has that hash.
        """
        for tree, _ in self._walk():
            if tree.hash == hash:
                return tree
        raise ValueError(f"Tree has no vertex with hash={hash}.")

    def __contains__(self, other: Tree) -> bool:
        """Whether ``other`` is a vertex of this tree (same edge hash; a root is
        matched by its node data)."""
        for tree in self.vertices(key_type="id").values():
            if other.hash is not None and tree.hash == other.hash:
                return True
            if other.hash is None and _same_data(tree.node_data, other.node_data):
                return True
        return False

    def edges(self) -> list[tuple[int, int]]:
        """``(parent id, child id)`` pairs, breadth first."""
        return [
            (tree.node_id, child.node_id) for tree, _ in self._walk() for child in tree._children()
        ]

    def valid_paths(self) -> Iterator[tuple[int, ...]]:
        """Yields the child-index path of every leaf, breadth first."""
        for tree, path in self._walk():
            if not tree.num_children:
                yield path

    def max_length(self) -> int:
        """The length of the longest root-to-leaf path (``0`` for a lone root)."""
        return max((len(p) for p in self.valid_paths()), default=0)

    def rollout_from_path(self, path: tuple[int, ...]) -> TensorDictBase | None:
        """The rollouts along ``path`` concatenated in time (``None`` if there are none).

        Raises:
            IndexError: if the path leaves the tree.
        """
        tree, parts = self, []
        if tree.rollout is not None:
            parts.append(tree.rollout)
        for depth, i in enumerate(path):
            if not 0 <= i < tree.num_children:
                raise IndexError(
                    f"Tree path {path} leaves the tree at depth {depth}: the vertex has "
                    f"{tree.num_children} children."
                )
            tree = tree.subtree[i]
            if tree.rollout is not None:
                parts.append(tree.rollout)
        return torch.cat(parts, -1) if parts else None

    def to_string(self, node_format_fn: Callable[[Tree], Any] = _default_format) -> str:
        """One line per non-root vertex, depth first: its path (indented by depth)
        and ``node_format_fn(vertex)``."""
        lines = []
        stack: list[tuple[Tree, tuple[int, ...]]] = [(self, ())]
        while stack:
            tree, path = stack.pop()
            children = tree._children()
            for i in range(len(children) - 1, -1, -1):
                stack.append((children[i], (*path, i)))
            if tree.rollout is not None and path:
                lines.append(f"{' ' * (len(path) - 1)}{path} {node_format_fn(tree)}")
        return "\n".join(lines)

    def plot(
        self,
        backend: str = "plotly",
        figure: str = "tree",
        info: list[str] | None = None,
        make_labels: Callable[[Tree], Any] | None = None,
    ) -> Any:  # Any: the backend's figure
        """Draws the tree with plotly (``pip install plotly``) and returns the figure.

        Args:
            backend (str, optional): only ``"plotly"``. Defaults to ``"plotly"``.
            figure (str, optional): ``"tree"`` (vertices and edges) or ``"box"``
                (a treemap). Defaults to ``"tree"``.
            info (list of str, optional): unused, for API compatibility. Defaults to ``None``.
            make_labels (callable, optional): ``vertex -> label``. Defaults to the node id.

        Raises:
            NotImplementedError: for another backend or figure.
            ImportError: without plotly.
        """
        if backend != "plotly" or figure not in ("tree", "box"):
            raise NotImplementedError(
                f"Tree.plot supports backend='plotly' with figure='tree' or 'box', got "
                f"backend={backend!r}, figure={figure!r}."
            )
        try:
            go = importlib.import_module("plotly.graph_objects")
        except ImportError as err:
            raise ImportError(f"Tree.plot needs plotly. Install it with: {PLOTLY_INSTALL}") from err
        label = make_labels or (lambda tree: f"node {tree.node_id}")
        vertices = self.vertices(key_type="id")
        if figure == "box":
            parents = {child: parent for parent, child in self.edges()}
            ids = list(vertices)
            fig = go.Figure(
                go.Treemap(
                    ids=[str(i) for i in ids],
                    labels=[str(label(vertices[i])) for i in ids],
                    parents=[str(parents[i]) if i in parents else "" for i in ids],
                )
            )
            return fig
        depth = {self.node_id: 0}
        for parent, child in self.edges():
            depth.setdefault(child, depth[parent] + 1)
        rows: dict[int, int] = {}
        pos = {}
        for node in vertices:
            d = depth.get(node, 0)
            pos[node] = (rows.get(d, 0), -d)
            rows[d] = rows.get(d, 0) + 1
        xs, ys = [], []
        for parent, child in self.edges():
            xs += [pos[parent][0], pos[child][0], None]
            ys += [pos[parent][1], pos[child][1], None]
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="none"))
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in vertices],
                y=[pos[n][1] for n in vertices],
                mode="markers+text",
                text=[str(label(vertices[n])) for n in vertices],
            )
        )
        return fig


_FIELD_SETATTR = Tree.__setattr__


def _set_subtree_parents(self: Tree, name: str, value: Any) -> None:  # Any: any field value
    """Field assignment that also points each new child back to its parent (weakly)."""
    if name == "subtree" and value is not None and not self.batch_size:
        ref = weakref.ref(_td.tensorclass_data(self))
        for i in range(len(value)):
            value[i]._parent = ref
    _FIELD_SETATTR(self, name, value)


# tensorclass builds __setattr__ itself; wrapping it afterwards keeps field storage intact
Tree.__setattr__ = _set_subtree_parents


def attach_children(parent: Tree, children: list[Tree]) -> None:
    """Sets ``parent.subtree`` to the stack of ``children``, each pointing back to ``parent``."""
    ref = weakref.ref(_td.tensorclass_data(parent))
    for child in children:
        _FIELD_SETATTR(child, "_parent", ref)
    stack = LazyStackedTensorDict(*[_td.tensorclass_data(child) for child in children], stack_dim=0)
    _FIELD_SETATTR(parent, "subtree", Tree.from_tensordict(stack))


def _same_data(a: TensorDictBase | None, b: TensorDictBase | None) -> bool:
    if a is None or b is None:
        return a is b
    keys_a = set(a.keys(True, True))
    if keys_a != set(b.keys(True, True)):
        return False
    return all(
        a.get(k).shape == b.get(k).shape and bool((a.get(k) == b.get(k)).all()) for k in keys_a
    )
