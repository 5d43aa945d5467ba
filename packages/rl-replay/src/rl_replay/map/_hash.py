"""Hashing modules for maps: :class:`SipHash`, :class:`RandomProjectionHash`,
:class:`BinaryToDecimal` and :class:`HashToInt`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["BinaryToDecimal", "HashToInt", "RandomProjectionHash", "SipHash"]


class BinaryToDecimal(nn.Module):
    """A Module to convert binaries encoded tensors to decimals.

    The last dim of the input is cut into groups of ``num_bits`` bits (most
    significant first); each group is read as a number and the groups are summed.

    Args:
        num_bits (int): the number of bits of a group. The input's last dim must be
            a multiple of it.
        device (torch.device): the device of the bases table.
        dtype (torch.dtype): the output dtype.
        convert_to_binary (bool, optional): if ``True``, positive inputs count as
            ``1`` and the others as ``0`` (a Heaviside step). Defaults to ``False``.

    Raises:
        ValueError: if the input's last dim is not a multiple of ``num_bits``.

    Examples:
        >>> import torch
        >>> b2d = BinaryToDecimal(num_bits=4, device="cpu", dtype=torch.int32, convert_to_binary=True)
        >>> b2d(torch.tensor([[0.0, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 10, 0]]))
        tensor([3, 2], dtype=torch.int32)
    """

    def __init__(
        self,
        num_bits: int,
        device: torch.device | str | None,
        dtype: torch.dtype,
        convert_to_binary: bool = False,
    ) -> None:
        super().__init__()
        self.num_bits = num_bits
        self.convert_to_binary = convert_to_binary
        self.register_buffer(
            "bases", 2 ** torch.arange(num_bits - 1, -1, -1, device=device, dtype=dtype)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        width = features.shape[-1]
        if width < self.num_bits or width % self.num_bits:
            raise ValueError(
                f"BinaryToDecimal expected a last dim that is a multiple of num_bits={self.num_bits}, "
                f"got {width}. Pad the input or pick another num_bits."
            )
        bits = (features > 0) if self.convert_to_binary else features
        groups = bits.to(self.bases.dtype).reshape(*features.shape[:-1], -1, self.num_bits)
        return (groups * self.bases).sum(-1).sum(-1).to(self.bases.dtype)


class SipHash(nn.Module):
    """A Module to Compute SipHash values for given tensors.

    Each row of a ``[batch, features]`` input (its bytes) is hashed with
    Python's builtin bytes hash, which is SipHash; the output is ``[batch]``.
    Hashes are stable within a process; set ``PYTHONHASHSEED`` before starting
    Python to get the same values across runs.

    Args:
        as_tensor (bool, optional): if ``True``, return an int64 tensor of the
            hashes; otherwise the list of the rows' bytes. Defaults to ``True``.

    Raises:
        TypeError: if the input is not a tensor.

    Examples:
        >>> import torch
        >>> a = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.1, 0.2]])
        >>> h = SipHash()(a)
        >>> h.dtype, h.shape, bool(h[0] == h[2]), bool(h[0] == h[1])
        (torch.int64, torch.Size([3]), True, False)
    """

    def __init__(self, as_tensor: bool = True) -> None:
        super().__init__()
        self.as_tensor = as_tensor

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[bytes]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__} expected a tensor of shape [batch, features], got "
                f"{type(x).__name__}. Pass the entry as a tensor."
            )
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.to(torch.float16)
        if x.ndim == 1:
            x = x.unsqueeze(-1)
        rows = x.reshape(x.shape[0], -1).contiguous().numpy()
        if not self.as_tensor:
            return [row.tobytes() for row in rows]
        return torch.tensor([hash(row.tobytes()) for row in rows], dtype=torch.int64)


class RandomProjectionHash(SipHash):
    """A module that combines random projections with SipHash to get a low-dimensional tensor, easier to embed through SipHash.

    The input's last dim is projected on ``n_components`` random directions
    (drawn at the first call), cast to ``dtype_cast`` and hashed row by row.

    Keyword Args:
        n_components (int, optional): the number of projections. Defaults to ``16``.
        dtype_cast (torch.dtype, optional): the dtype of the projection. Defaults to
            ``torch.bfloat16``.
        as_tensor (bool, optional): see :class:`SipHash`. Defaults to ``True``.
        init_method (callable, optional): fills the projection matrix in place.
            Defaults to :func:`torch.nn.init.normal_`.

    Examples:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> h = RandomProjectionHash(n_components=8)
        >>> x = torch.randn(100, 32)
        >>> out = h(x)
        >>> out.shape, out.unique().numel()
        (torch.Size([100]), 100)
    """

    _N_COMPONENTS_DEFAULT = 16

    def __init__(
        self,
        *,
        n_components: int | None = None,
        dtype_cast: torch.dtype = torch.bfloat16,
        as_tensor: bool = True,
        init_method: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
    ) -> None:
        super().__init__(as_tensor=as_tensor)
        self._components = self._N_COMPONENTS_DEFAULT if n_components is None else n_components
        self.dtype_cast = dtype_cast
        self.init_method = torch.nn.init.normal_ if init_method is None else init_method
        self.register_buffer("transform", None)

    @property
    def n_components(self) -> int:
        """The number of random projections."""
        return self._components

    def fit(self, x: torch.Tensor) -> None:
        """Draws the projection matrix for inputs shaped like ``x``."""
        transform = torch.empty(x.shape[-1], self.n_components, device=x.device)
        self.init_method(transform)
        self.transform = transform

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[bytes]:
        if not isinstance(x, torch.Tensor):
            return super().forward(x)  # raises the TypeError
        if self.transform is None:
            self.fit(x)
        elif self.transform.shape[0] != x.shape[-1]:
            raise ValueError(
                f"RandomProjectionHash was fit on inputs with {self.transform.shape[0]} features, "
                f"got {x.shape[-1]}. Build another RandomProjectionHash for this input."
            )
        projected = (x.to(torch.float32) @ self.transform.to(torch.float32)).to(self.dtype_cast)
        return super().forward(projected)


class HashToInt(nn.Module):
    """Converts a hash value to an integer that can be used for indexing a contiguous storage.

    The first hash seen gets ``0``, the next new one ``1``, and so on. With
    ``extend=False`` unknown hashes are not registered and map to ``-1``.

    Raises:
        TypeError: if the hash is not an integer tensor.

    Examples:
        >>> import torch
        >>> h2i = HashToInt()
        >>> h2i(torch.tensor([17, -5, 17]))
        tensor([0, 1, 0])
        >>> h2i(torch.tensor([99, -5]), extend=False)
        tensor([-1,  1])
        >>> len(h2i)
        2
    """

    def __init__(self) -> None:
        super().__init__()
        self._index: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._index)

    def get_next_index(self) -> int:
        """The integer the next new hash will get."""
        return len(self._index)

    def forward(self, key: torch.Tensor, extend: bool = True) -> torch.Tensor:
        if (
            not isinstance(key, torch.Tensor)
            or key.dtype.is_floating_point
            or key.dtype == torch.bool
        ):
            found = key.dtype if isinstance(key, torch.Tensor) else type(key).__name__
            raise TypeError(
                f"HashToInt expected an integer tensor of hashes (e.g. SipHash output, int64), got "
                f"{found}. Hash the entry first (SipHash) or cast it to torch.int64."
            )
        values = key.reshape(-1).tolist()
        index = self._index
        if extend:
            out = []
            for value in values:
                i = index.get(value)
                if i is None:
                    i = index[value] = len(index)
                out.append(i)
        else:
            out = [index.get(value, -1) for value in values]
        return torch.tensor(out, dtype=torch.int64, device=key.device).reshape(key.shape)
