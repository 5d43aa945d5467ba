"""The memory-mapped storage :class:`LazyMemmapStorage`."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor
from tensordict.utils import NestedKey

from rl_replay.storages.tensor import LazyTensorStorage

__all__ = ["LazyMemmapStorage"]


class LazyMemmapStorage(LazyTensorStorage):
    """A memory-mapped storage for tensors and tensordicts.

    One memory-mapped file per leaf is created under ``scratch_dir`` on the
    first write.  Handing the buffer to another process (fork or spawn) shares
    the files and the length counter, so writes from any process are visible to
    all of them.

    Args:
        max_size (int): the capacity in elements.
        scratch_dir (str or Path, optional): the directory of the memory-mapped
            files. Defaults to a fresh temporary directory, removed when the
            storage that created it is garbage-collected.
        device (torch.device or str, optional): where sampled data is placed;
            the files always live on CPU. Defaults to ``"cpu"``.
        ndim (int, optional): number of storage dims. Defaults to ``1``.
        existsok (bool, optional): whether files already present in
            ``scratch_dir`` may be overwritten. Defaults to ``False``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

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
    ) -> None:
        super().__init__(max_size, device=device, ndim=ndim, compilable=compilable)
        self.scratch_dir = None if scratch_dir is None else Path(scratch_dir)
        self.existsok = existsok

    def _allocate_leaves(
        self, specs: dict[NestedKey, tuple[torch.Size, torch.dtype]], batch: torch.Size
    ) -> dict[NestedKey, torch.Tensor]:
        # one file per leaf, not row-interleaved: checkpoints and other processes open
        # the files by key
        return {key: self._allocate(key, shape, dtype) for key, (shape, dtype) in specs.items()}

    def _allocate(self, key: NestedKey, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        if self.scratch_dir is None:
            self.scratch_dir = Path(tempfile.mkdtemp(prefix="rl_replay_"))
            # a temporary directory is removed with the storage that created it
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.scratch_dir), True)
        parts = key if isinstance(key, tuple) else (key,)
        filename = self.scratch_dir.joinpath(*parts[:-1], f"{parts[-1]}.memmap")
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
