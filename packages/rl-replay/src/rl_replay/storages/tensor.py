"""Contiguous tensor storages: :class:`TensorStorage` and :class:`LazyTensorStorage`.

Data is kept as one preallocated tensor per leaf inside a ``TensorDict``
(plain tensors and pytrees are converted internally and rebuilt on read); the
leaves a lazy storage allocates are column views of one row-interleaved buffer per
dtype (see ``_packed``), so that sampling a row touches adjacent memory.  The
number of valid rows lives in a shared-memory tensor so that a buffer handed to
another process (fork or spawn) sees the writes of every process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection, unravel_key
from tensordict.utils import NestedKey

from rl_replay import _td
from rl_replay._alloc import empty_storage_tensor
from rl_replay.checkpointers.tensor import TensorStorageCheckpointer
from rl_replay.storages._layout import _Layout, _leaves_of, _nest
from rl_replay.storages._packed import packed_leaves
from rl_replay.storages.base import Storage

__all__ = ["LazyTensorStorage", "TensorStorage"]

_COPY_BLOCK = 1 << 18  # bytes of the widest leaf copied per block when loading a checkpoint


class TensorStorage(Storage):
    """A storage for tensors and tensordicts.

    The container is given at construction time: a tensor, a tensordict or a
    pytree of tensors whose first ``ndim`` dims are the storage dims.

    Args:
        storage (Tensor, TensorDictBase or pytree): the preallocated container.
        max_size (int, optional): the capacity. Defaults to the number of
            elements over the first ``ndim`` dims of ``storage``.
        device (torch.device or str, optional): where sampled data is placed.
            Defaults to ``"cpu"``.
        ndim (int, optional): number of storage dims. Defaults to ``1``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        ValueError: if ``ndim`` is not a positive int or the container has fewer dims.

    Examples:
        >>> import torch
        >>> from rl_replay import ReplayBuffer, TensorStorage
        >>> container = torch.empty(10, 3, 64, 64, dtype=torch.uint8)
        >>> rb = ReplayBuffer(storage=TensorStorage(container))
        >>> img = torch.randint(255, (3, 64, 64), dtype=torch.uint8)
        >>> rb.add(img)
        0
        >>> len(rb), rb[0].shape
        (1, torch.Size([3, 64, 64]))
    """

    _default_checkpointer = TensorStorageCheckpointer

    def __init__(
        self,
        storage: Any,  # Any: a tensor, a tensordict or a pytree of tensors
        max_size: int | None = None,
        *,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        compilable: bool = False,
    ) -> None:
        if isinstance(ndim, bool) or not isinstance(ndim, int) or ndim < 1:
            raise ValueError(
                f"{type(self).__name__} expected ndim to be an int >= 1, got {ndim!r}."
            )
        self.ndim = ndim
        self.device = torch.device(device) if device != "auto" else torch.device("cpu")
        self._len_value = torch.zeros((), dtype=torch.long).share_memory_()
        self._storage: TensorDictBase | None = None
        self._layout: _Layout | None = None
        if storage is not None:
            td, spec = _as_tensordict(storage, ndim)
            numel = td.batch_size[:ndim].numel()
            super().__init__(numel if max_size is None else max_size, compilable=compilable)
            if spec is not None or not td.is_empty():
                self._adopt(td, spec)
            # else: a container without entries (TensorDict(batch_size=[n])) only gives the
            # capacity; the entries are allocated from the first write, as a lazy storage does
        else:
            super().__init__(max_size, compilable=compilable)

    # ------------------------------------------------------------ layout
    @property
    def initialized(self) -> bool:
        """Whether the storage tensors exist (lazy storages allocate on first write)."""
        return self._storage is not None

    @property
    def shape(self) -> torch.Size:
        if self._storage is None:
            return super().shape
        return self._storage.batch_size

    def _adopt(self, td: TensorDictBase, spec: Any) -> None:
        self._storage = td
        self._layout = _Layout(td, spec, self.ndim)
        self.max_size = td.batch_size.numel()

    def _allocate_leaves(
        self, specs: dict[NestedKey, tuple[torch.Size, torch.dtype]], batch: torch.Size
    ) -> dict[NestedKey, torch.Tensor]:
        """Uninitialised storage tensors for ``{key: (shape, dtype)}``: row-interleaved views."""
        return packed_leaves(specs, batch, lambda s, d: empty_storage_tensor(s, d, self.device))

    def _init(self, data: Any, cursor: Any) -> None:
        leaves, spec = _leaves_of(data)
        data_dims = self.ndim - 1 if isinstance(cursor, int) else self.ndim
        if is_tensor_collection(data):
            lead = data.batch_size
        else:
            lead = leaves[0][1].shape
        if len(lead) < data_dims:
            raise ValueError(
                f"{type(self).__name__}(ndim={self.ndim}) expected data with at least {data_dims} "
                f"batch dims, found batch shape {tuple(lead)}. Lower ndim or add batch dims."
            )
        lead = lead[:data_dims]
        for key, leaf in leaves:
            if leaf.shape[:data_dims] != lead:
                raise ValueError(
                    f"{type(self).__name__} expected every leaf to start with the dims "
                    f"{tuple(lead)}, found {key!r} of shape {tuple(leaf.shape)}. PyTree leaves "
                    "must share their leading dims."
                )
        inner = lead[data_dims - self.ndim + 1 :] if self.ndim > 1 else torch.Size([])
        per_row = inner.numel()
        rows = -(self.max_size // -per_row)
        shape = torch.Size([rows, *inner])
        specs = {
            key: (torch.Size([*shape, *leaf.shape[data_dims:]]), leaf.dtype) for key, leaf in leaves
        }
        flat = self._allocate_leaves(specs, shape)
        self._adopt(_td.new_unchecked(_nest(flat), batch_size=shape), spec)

    def _rows_for_write(self, data: Any, single: bool) -> int:
        """Allocate from ``data`` if needed; return the size of the cursor dim."""
        if self._storage is None:
            self._init(data, 0 if single else None)
        return self._storage.batch_size[0]

    # ------------------------------------------------------------ length
    def __len__(self) -> int:
        if self._storage is None:
            return 0
        return int(self._len_value) * self._layout.per_row

    @property
    def _per_row(self) -> int:
        return self._layout.per_row if self._layout is not None else 1

    @property
    def _len_along_dim0(self) -> int:
        return int(self._len_value)

    def _grow(self, cursor: Any) -> None:
        rows = self._layout.shape[0]
        if isinstance(cursor, int):
            top = cursor + 1
        elif isinstance(cursor, slice):
            top = rows if cursor.stop is None else cursor.stop
        elif isinstance(cursor, torch.Tensor) and cursor.ndim == 1:
            if cursor.numel() == 0:
                return
            top = int(cursor.max()) + 1
        else:
            return
        top = min(top, rows)
        if top > self._len_value.item():
            self._len_value.fill_(top)

    # ------------------------------------------------------------ read / write
    def _lead_shape(self, cursor: Any) -> torch.Size:
        shape = self._storage.batch_size
        if isinstance(cursor, int):
            return shape[1:]
        if isinstance(cursor, torch.Tensor) and cursor.ndim == 1 and cursor.dtype != torch.bool:
            return torch.Size([cursor.shape[0], *shape[1:]])
        if isinstance(cursor, slice) and cursor.step is None:
            return torch.Size([len(range(shape[0])[cursor]), *shape[1:]])
        return torch.empty(shape, device="meta")[cursor].shape

    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        """Write ``data`` at ``cursor``, validating every leaf before copying any.

        Args:
            cursor (int, slice, Tensor or tuple of Tensor): where to write.
            data (Tensor, TensorDictBase or pytree): what to write.
            set_cursor (bool, optional): grow the length (the writer path).
                Defaults to ``True``.

        Raises:
            KeyError: if the keys differ from the stored ones.
            ValueError: if shapes differ or the data cannot satisfy ``ndim``.
        """
        if isinstance(cursor, (list, range)):
            cursor = torch.as_tensor(cursor, dtype=torch.long)
        if self._storage is None:
            self._init(data, cursor)
        pairs = self._layout.match(data, self._lead_shape(cursor))
        if isinstance(cursor, torch.Tensor) and cursor.ndim == 1 and cursor.dtype == torch.long:
            for dest, value in pairs:
                if value.dtype == dest.dtype and value.device == dest.device:
                    dest.index_copy_(0, cursor, value)
                else:
                    dest[cursor] = value
        else:
            for dest, value in pairs:
                dest[cursor] = value
        if set_cursor:
            self._grow(cursor)

    def get(self, index: Any) -> Any:  # Any: mirrors the written data type
        """Gather ``index`` from every leaf and rebuild the written structure.

        Raises:
            RuntimeError: if nothing was ever written.
        """
        layout = self._layout
        if layout is None:
            self._require_layout()
        if type(index) is torch.Tensor and index.dim() == 1 and index.dtype == torch.long:
            return layout.gather(index)  # the sampling hot path
        if isinstance(index, list):
            index = torch.as_tensor(index, dtype=torch.long)
        flat = {key: tensor[index] for key, tensor in zip(layout.keys, layout.tensors, strict=True)}
        first = flat[layout.keys[0]]
        batch_size = first.shape[: first.ndim - len(layout.tails[layout.keys[0]])]
        return layout.build(flat, batch_size)

    def _get_entry(self, key: NestedKey, index: Any = None) -> torch.Tensor:
        """The stored tensor for ``key`` (the full storage tensor when ``index`` is None).

        Raises:
            KeyError: if ``key`` is not stored.
        """
        layout = self._require_layout()
        tensor = layout.by_key.get(unravel_key(key))
        if tensor is None:
            raise KeyError(f"No entry {key!r} in the storage. Stored keys: {layout.keys}.")
        return tensor if index is None else tensor[index]

    def _require_layout(self) -> _Layout:
        if self._layout is None:
            raise RuntimeError(
                f"{type(self).__name__} is empty: expected at least one write before reading, "
                "found none. Extend the buffer first."
            )
        return self._layout

    # ------------------------------------------------------------ state
    def _empty(self) -> None:
        self._len_value.fill_(0)

    def _metadata(self) -> dict[str, Any]:
        layout = self._layout
        return {
            "type": type(self).__name__,
            "initialized": layout is not None,
            "len": int(self._len_value),
            "max_size": self.max_size,
            "ndim": self.ndim,
            "shape": list(self.shape),
            "tree_spec": None
            if layout is None or layout.tree_spec is None
            else _td.treespec_dumps(layout.tree_spec),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"_storage": self._storage, "metadata": json.dumps(self._metadata())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        meta = json.loads(state_dict["metadata"])
        self._load_content(state_dict["_storage"], meta)

    def _load_content(self, td: TensorDictBase | None, meta: dict[str, Any]) -> None:
        """Copy ``td`` into this storage (allocating it if needed) and set the length.

        Raises:
            ValueError: if the content does not fit this storage (nothing is changed then).
        """
        self._stage_content(td, meta, "the saved state")()

    def _stage_content(
        self, td: TensorDictBase | None, meta: Any, source: str
    ) -> Callable[[], None]:  # Any: metadata read from a file, validated here
        """Validate ``td`` and ``meta`` against this storage; return the step that loads them.

        ``td`` holds either every row of the saved storage or only its first
        (valid) rows; ``meta["shape"]`` is the saved storage shape.  Nothing is
        changed until the returned function is called, and that function only
        copies data that was checked to fit.

        Raises:
            ValueError: if the content or a metadata value does not fit this storage
                or the storage's invariants (``source`` names where they came from).
        """
        name = type(self).__name__
        if not isinstance(meta, dict):
            raise ValueError(f"{name} expected a metadata dict in {source}, found {meta!r}.")
        missing = {"initialized", "len", "ndim", "shape", "tree_spec"} - set(meta)
        if missing:
            raise ValueError(
                f"{name} expected the entries {sorted(missing)} in {source}; it is not a tensor "
                "storage checkpoint."
            )
        if meta["ndim"] != self.ndim:
            raise ValueError(
                f"{name} has ndim={self.ndim} but {source} has ndim={meta['ndim']!r}. Build the "
                f"storage with ndim={meta['ndim']!r}."
            )
        length = meta["len"]
        if not meta["initialized"] or td is None:
            if meta["initialized"] is not False or td is not None or length != 0:
                raise ValueError(
                    f"{name} expected an empty checkpoint (initialized=false, len=0, no data) in "
                    f"{source}, found initialized={meta['initialized']!r}, len={length!r}. The "
                    "checkpoint is corrupt; dump it again."
                )
            return self._empty
        shape = meta["shape"]
        if (
            not isinstance(shape, list)
            or len(shape) != self.ndim
            or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
        ):
            raise ValueError(
                f"{name} expected the shape in {source} to be {self.ndim} positive ints, found "
                f"{shape!r}. The checkpoint is corrupt; dump it again."
            )
        shape = torch.Size(shape)
        if meta.get("max_size", shape.numel()) != shape.numel():
            raise ValueError(
                f"{name} expected max_size={shape.numel()} (the number of elements of the shape "
                f"{tuple(shape)}) in {source}, found {meta['max_size']!r}. The checkpoint is corrupt."
            )
        try:
            spec = None if meta["tree_spec"] is None else _td.treespec_loads(meta["tree_spec"])
        except Exception as err:  # treespec_loads raises several types on bad input
            raise ValueError(
                f"{name} could not read the tree_spec of {source} ({err}). The checkpoint is corrupt."
            ) from err
        rows = td.batch_size[0] if td.batch_dims else 0
        if td.batch_size[1:] != shape[1:] or rows > shape[0] or td.batch_dims != self.ndim:
            raise ValueError(
                f"{name} content of batch shape {tuple(td.batch_size)} does not fit the shape "
                f"{tuple(shape)} recorded in {source}. The checkpoint is corrupt; dump it again."
            )
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= rows:
            raise ValueError(
                f"{name} expected len to be an int in [0, {rows}] (the rows saved) in {source}, "
                f"found {length!r}. The checkpoint is corrupt; dump it again."
            )
        if spec is not None and sorted(td.keys()) != sorted(str(i) for i in range(spec.num_leaves)):
            raise ValueError(
                f"{name} expected the leaves '0'..'{spec.num_leaves - 1}' of its tree_spec in "
                f"{source}, found {sorted(td.keys())}. The checkpoint is corrupt; dump it again."
            )
        leaves = list(td.items(True, True))
        if not leaves:
            raise ValueError(f"{name} found no tensor in {source}. The checkpoint is corrupt.")
        if self._storage is None:
            return lambda: self._apply_content(td, spec, shape, rows, length)
        if self._storage.batch_size != shape:
            raise ValueError(
                f"{name} has shape {tuple(self.shape)} but {source} has shape {tuple(shape)}. "
                "Load into a storage of the same capacity."
            )
        pairs = self._layout.match(td if spec is None else _rebuild(td, spec), td.batch_size)
        for dest, value in pairs:
            if dest.dtype != value.dtype:
                raise ValueError(
                    f"{name} stores {dest.dtype} where {source} has {value.dtype}. Load it into a "
                    "storage that holds the same dtypes, or a fresh one."
                )
        return lambda: self._apply_content(td, spec, shape, rows, length)

    def _apply_content(
        self, td: TensorDictBase, spec: Any, shape: torch.Size, rows: int, length: int
    ) -> None:
        if self._storage is None:
            self.max_size = shape.numel()
            self._init_from(td, spec, shape)
        pairs = [
            (dest, td.get(key))
            for dest, key in zip(self._layout.tensors, self._layout.keys, strict=True)
        ]
        widest = max(max(src[:1].numel(), 1) * src.element_size() for _, src in pairs)
        step = max(1, _COPY_BLOCK // widest)
        for start in range(0, rows, step):  # rows of every leaf at a time: cache-friendly
            for dest, src in pairs:
                dest[start : min(start + step, rows)].copy_(src[start : start + step])
        self._len_value.fill_(length)

    def _init_from(self, td: TensorDictBase, spec: Any, shape: torch.Size) -> None:
        specs = {
            key: (torch.Size([*shape, *t.shape[td.batch_dims :]]), t.dtype)
            for key, t in td.items(True, True)
        }
        flat = self._allocate_leaves(specs, shape)
        self._adopt(_td.new_unchecked(_nest(flat), batch_size=shape), spec)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_layout"] = None
        state["_spec_str"] = self._metadata()["tree_spec"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        spec_str = state.pop("_spec_str")
        self.__dict__.update(state)
        if self._storage is not None:
            spec = None if spec_str is None else _td.treespec_loads(spec_str)
            self._layout = _Layout(self._storage, spec, self.ndim)


class LazyTensorStorage(TensorStorage):
    """A pre-allocated tensor storage for tensors and tensordicts.

    The tensors are allocated on the first write, from the structure of the
    data written.

    Args:
        max_size (int): the capacity in elements (rounded up to a multiple of
            the non-leading storage dims when ``ndim > 1``).
        device (torch.device or str, optional): where the storage lives.
            Defaults to ``"cpu"``.
        ndim (int, optional): number of storage dims. Defaults to ``1``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        consolidated (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Raises:
        ValueError: if ``max_size`` is not a positive int.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import ReplayBuffer, LazyTensorStorage
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(100, ndim=2), batch_size=4)
        >>> _ = rb.extend(TensorDict({"obs": torch.randn(2, 7)}, [2, 7]))  # 2 envs, 7 steps
        >>> len(rb), rb[:].shape  # storage dims are [time, env]
        (14, torch.Size([7, 2]))
    """

    def __init__(
        self,
        max_size: int,
        *,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        compilable: bool = False,
        consolidated: bool = False,
    ) -> None:
        super().__init__(None, max_size, device=device, ndim=ndim, compilable=compilable)


def _as_tensordict(storage: Any, ndim: int) -> tuple[TensorDictBase, Any]:
    leaves, spec = _leaves_of(storage)
    if spec is None:
        td = storage
    else:
        first = leaves[0][1]
        if first.ndim < ndim:
            raise ValueError(
                f"TensorStorage(ndim={ndim}) expected a container with at least {ndim} dims, "
                f"found shape {tuple(first.shape)}."
            )
        td = _td.new_unchecked(dict(leaves), batch_size=first.shape[:ndim])
    if td.batch_dims < ndim:
        raise ValueError(
            f"TensorStorage(ndim={ndim}) expected a container with at least {ndim} batch dims, "
            f"found batch size {tuple(td.batch_size)}."
        )
    if td.batch_dims > ndim:
        td = _td.new_unchecked(_nest(dict(td.items(True, True))), batch_size=td.batch_size[:ndim])
    return td, spec


def _rebuild(td: TensorDictBase, spec: Any) -> Any:
    return _td.tree_unflatten([td.get(str(i)) for i in range(len(td.keys()))], spec)
