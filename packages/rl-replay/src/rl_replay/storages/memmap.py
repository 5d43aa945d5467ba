"""The memory-mapped storage :class:`LazyMemmapStorage`."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor
from tensordict.utils import NestedKey

from rl_replay import _td
from rl_replay.checkpointers._files import DTYPES, read_json, write_json
from rl_replay.storages._layout import _nest
from rl_replay.storages.tensor import LazyTensorStorage

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LazyMemmapStorage"]

LAYOUT_FILE = ".rl_replay_layout.json"
LOCK_FILE = ".rl_replay_alloc.lock"


class LazyMemmapStorage(LazyTensorStorage):
    """A memory-mapped storage for tensors and tensordicts.

    One memory-mapped file per leaf is created under ``scratch_dir`` on the
    first write.  Handing the buffer to another process (fork or spawn) shares
    the files and the length counter, so writes from any process are visible to
    all of them -- also when the buffer is handed over before its first write:
    the first process to write allocates the files and records their layout in
    ``scratch_dir``, and every other process maps those same files.

    Args:
        max_size (int): the capacity in elements.
        scratch_dir (str or Path, optional): the directory of the memory-mapped
            files. Defaults to a fresh temporary directory (made at construction).
        device (torch.device or str, optional): where sampled data is placed;
            the files always live on CPU. Defaults to ``"cpu"``.
        ndim (int, optional): number of storage dims. Defaults to ``1``.
        existsok (bool, optional): whether files already present in
            ``scratch_dir`` may be overwritten. Defaults to ``False``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        auto_cleanup (bool, optional): remove ``scratch_dir`` and its files when
            the storage is garbage-collected or the process exits (only in the
            process that built the storage). Defaults to ``True`` for the
            temporary directory made when ``scratch_dir`` is ``None`` and to
            ``False`` for a directory given by the caller (its data is kept).

    Raises:
        RuntimeError: at the first write, if a file exists and ``existsok`` is ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_replay import ReplayBuffer, LazyMemmapStorage
        >>> rb_td = ReplayBuffer(storage=LazyMemmapStorage(10), batch_size=1)  # max 10 elements stored
        >>> rb_td.add(TensorDict({"img": torch.randint(255, (3, 64, 64), dtype=torch.uint8),
        ...     "labels": torch.randint(100, ())}, batch_size=[]))
        0
        >>> rb_pytree = ReplayBuffer(storage=LazyMemmapStorage(10))  # max 10 elements stored
        >>> # extend with a PyTree where all tensors have the same leading dim (3)
        >>> _ = rb_pytree.extend({"a": {"b": torch.randn(3), "c": [torch.zeros(3, 2), (torch.ones(3, 10),)]}})
        >>> assert len(rb_pytree) == 3  # the replay buffer has 3 elements!
        >>> first_elt = rb_td[0]
        >>> storage = rb_td[:] # returns all valid elements from the buffer
        >>> sample = rb_td.sample(128)
        >>> for _, data in zip(range(2), rb_td):  # iterate over the buffer using the sampler -- batch-size was set in the constructor to 1
        ...     print(data["img"].shape)
        torch.Size([1, 3, 64, 64])
        torch.Size([1, 3, 64, 64])
    """

    def __init__(
        self,
        max_size: int,
        *,
        scratch_dir: str | Path | None = None,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        existsok: bool = False,
        compilable: bool = False,
        auto_cleanup: bool | None = None,
    ) -> None:
        super().__init__(max_size, device=device, ndim=ndim, compilable=compilable)
        if auto_cleanup is not None and not isinstance(auto_cleanup, bool):
            raise TypeError(
                f"LazyMemmapStorage expected auto_cleanup to be a bool or None, got "
                f"{auto_cleanup!r}."
            )
        self.existsok = existsok
        # identifies this storage (and its copies in other processes) in the layout file
        self._token = uuid.uuid4().hex
        if auto_cleanup is None:
            auto_cleanup = scratch_dir is None
        if scratch_dir is None:
            # created now, not at the first write, so that processes the buffer is handed
            # to before that write allocate in the same place as this one
            scratch_dir = tempfile.mkdtemp(prefix="rl_replay_")
        if auto_cleanup:  # also at interpreter exit (weakref.finalize runs then)
            self._cleanup = weakref.finalize(self, _remove_dir, str(scratch_dir), os.getpid())
        self.auto_cleanup = auto_cleanup
        self.scratch_dir = Path(scratch_dir)

    def cleanup(self) -> bool:
        """Remove ``scratch_dir`` and the memory-mapped files in it, now.

        Called on garbage collection and at exit when ``auto_cleanup`` is on;
        calling it again, or on a directory already gone, does nothing.  The
        storage cannot be read after a cleanup.

        Returns:
            ``True`` if stored files were removed, ``False`` if there was nothing
            to remove (already cleaned up, directory gone, nothing ever written).

        Examples:
            >>> import torch
            >>> from rl_replay import LazyMemmapStorage, ReplayBuffer
            >>> storage = LazyMemmapStorage(10)
            >>> _ = ReplayBuffer(storage=storage).extend(torch.zeros(3))
            >>> storage.cleanup(), storage.scratch_dir.exists(), storage.cleanup()
            (True, False, False)
        """
        finalizer = getattr(self, "_cleanup", None)
        if finalizer is not None:
            finalizer.detach()  # removed now: nothing left for exit or collection
        path = self.scratch_dir
        had_files = path.is_dir() and any(path.iterdir())
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        return had_files

    # ------------------------------------------------------------ shared lazy allocation
    def _init(self, data: Any, cursor: Any) -> None:
        with self._allocation_lock():
            if not self._attach_shared():  # first writer of all processes: allocate
                super()._init(data, cursor)
                self._publish_layout()

    def _init_from(self, td: Any, spec: Any, shape: torch.Size) -> None:
        with self._allocation_lock():
            if not self._attach_shared():
                super()._init_from(td, spec, shape)
                self._publish_layout()

    def __len__(self) -> int:
        if self._storage is None:
            self._attach_shared()
        return super().__len__()

    @property
    def initialized(self) -> bool:
        if self._storage is None:
            self._attach_shared()
        return self._storage is not None

    def _metadata(self) -> dict[str, Any]:
        if self._storage is None:
            self._attach_shared()
        return super()._metadata()

    def state_dict(self) -> dict[str, Any]:
        if self._storage is None:
            self._attach_shared()
        return super().state_dict()

    def get(self, index: Any) -> Any:  # Any: see TensorStorage.get
        if self._storage is None:
            self._attach_shared()
        return super().get(index)

    def _require_layout(self) -> Any:  # Any: the storage layout
        if self._layout is None:
            self._attach_shared()
        return super()._require_layout()

    @contextlib.contextmanager
    def _allocation_lock(self) -> Iterator[None]:
        """Serialise the first allocation over every process that shares ``scratch_dir``."""
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # no advisory locks on this platform: the writer's lock serialises
            yield
            return
        with open(self.scratch_dir / LOCK_FILE, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _publish_layout(self) -> None:
        layout = self._layout
        leaves = [
            {
                "key": list(key) if isinstance(key, tuple) else [key],
                "dtype": str(tensor.dtype).removeprefix("torch."),
                "shape": list(tensor.shape),
            }
            for key, tensor in zip(layout.keys, layout.tensors, strict=True)
        ]
        spec = None if layout.tree_spec is None else _td.treespec_dumps(layout.tree_spec)
        tmp = self.scratch_dir / f"{LAYOUT_FILE}.tmp-{os.getpid()}"
        write_json(
            tmp,
            {
                "token": self._token,
                "shape": list(layout.shape),
                "tree_spec": spec,
                "leaves": leaves,
            },
        )
        os.replace(tmp, self.scratch_dir / LAYOUT_FILE)

    def _attach_shared(self) -> bool:
        """Map the files another process allocated for this storage; ``False`` if none did."""
        if self._storage is not None:
            return True
        path = self.scratch_dir / LAYOUT_FILE
        if not path.is_file():
            return False
        layout = read_json(path, type(self).__name__)
        if layout.get("token") != self._token:
            return False  # the files of another storage: the existsok rules apply
        flat = {}
        for leaf in layout["leaves"]:
            key = tuple(leaf["key"]) if len(leaf["key"]) > 1 else leaf["key"][0]
            flat[key] = MemoryMappedTensor.from_filename(
                self._filename(key), dtype=DTYPES[leaf["dtype"]], shape=torch.Size(leaf["shape"])
            )
        spec = None if layout["tree_spec"] is None else _td.treespec_loads(layout["tree_spec"])
        shape = torch.Size(layout["shape"])
        self._adopt(_td.new_unchecked(_nest(flat), batch_size=shape), spec)
        return True

    # ------------------------------------------------------------ files
    def _allocate_leaves(
        self, specs: dict[NestedKey, tuple[torch.Size, torch.dtype]], batch: torch.Size
    ) -> dict[NestedKey, torch.Tensor]:
        # one file per leaf, not row-interleaved: checkpoints and other processes open
        # the files by key
        return {key: self._allocate(key, shape, dtype) for key, (shape, dtype) in specs.items()}

    def _filename(self, key: NestedKey) -> Path:
        parts = key if isinstance(key, tuple) else (key,)
        return self.scratch_dir.joinpath(*parts[:-1], f"{parts[-1]}.memmap")

    def _allocate(self, key: NestedKey, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        filename = self._filename(key)
        if filename.exists() and not self.existsok:
            raise RuntimeError(
                f"LazyMemmapStorage would overwrite the existing file {filename}. "
                "Pass existsok=True or choose another scratch_dir."
            )
        filename.parent.mkdir(parents=True, exist_ok=True)
        return MemoryMappedTensor.empty(
            shape, dtype=dtype, filename=filename, existsok=self.existsok
        )

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_cleanup", None)  # only the creating process removes its temporary files
        return state


def _remove_dir(path: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # forked children inherit the finalizer: never in them
        shutil.rmtree(path, ignore_errors=True)
