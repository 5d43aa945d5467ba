"""CPU allocation of large storage tensors on transparent huge pages.

Replay buffers gather random rows from tensors of hundreds of megabytes: with
4 KiB pages nearly every row costs a TLB miss.  Large CPU storages are
therefore allocated in an anonymous memory map aligned to 2 MiB and advised
``MADV_HUGEPAGE`` (when the platform has it), which makes random gathers
noticeably faster.  Small tensors, other devices and platforms without the
advice use ``torch.empty``.
"""

from __future__ import annotations

import math
import mmap

import torch

__all__ = ["empty_storage_tensor"]

HUGE_PAGE = 1 << 21
_ADVICE = getattr(mmap, "MADV_HUGEPAGE", None)


def empty_storage_tensor(
    shape: torch.Size, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """An uninitialised tensor for a storage, on huge pages when it is large and on CPU."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if device.type != "cpu" or _ADVICE is None or nbytes < HUGE_PAGE:
        return torch.empty(shape, dtype=dtype, device=device)
    region = mmap.mmap(-1, nbytes + HUGE_PAGE)
    region.madvise(_ADVICE)
    raw = torch.frombuffer(region, dtype=torch.uint8)  # the tensor keeps `region` alive
    offset = (-raw.data_ptr()) % HUGE_PAGE
    return raw[offset : offset + nbytes].view(dtype).view(shape)
