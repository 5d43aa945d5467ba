"""``tensor_text``: the text ``str(tensor)`` writes, built fast for small dense CPU tensors.

:meth:`Hash.reproducible_hash` hashes the text of a value, and for a tensor that
is ``str(tensor)``. torch builds that text with several tensor operations and
Python loops over 0-d tensors (about ten times the step of a cheap env); the same
text follows from the values read once with ``tolist()`` and torch's documented
layout rules (print options ``precision``, ``threshold``, ``linewidth``,
``sci_mode``). Anything outside the plain case (autograd, other devices, complex
or low-precision dtypes, summarised or empty tensors, subclasses) takes ``str``.
Tests compare the two on many tensors, so a torch release that changes its
layout fails them rather than the hashes silently drifting.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

# private: torch offers set_printoptions but no public getter; the options decide the text
from torch._tensor_str import PRINT_OPTS

# private: the check torch's printer itself makes to add device='cpu' (a tensor off the
# default device shows its device); torch.get_default_device() costs 30 times more
_default_device_type = getattr(torch._C, "_get_default_device", None)

_PREFIX = "tensor("
_INDENT = len(_PREFIX)
#: dtype -> whether it is a float; any other dtype takes ``str``
_KINDS = {
    torch.float32: True,
    torch.float64: True,
    **{t: False for t in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)},
    torch.bool: False,
}


def tensor_text(value: torch.Tensor) -> str:
    """``str(value)``, without torch's tensor operations when ``value`` is a plain case.

    Examples:
        >>> import torch
        >>> x = torch.tensor([[1.5, -2.0], [float("nan"), 1e-3]])
        >>> tensor_text(x) == str(x)
        True
        >>> tensor_text(torch.tensor([3, 40], dtype=torch.int32))
        'tensor([ 3, 40], dtype=torch.int32)'
    """
    if type(value) is not torch.Tensor:
        return str(value)
    dtype = value.dtype
    floating = _KINDS.get(dtype)
    if (
        floating is None
        or value.requires_grad
        or value.layout is not torch.strided
        or not value.is_cpu
        or any(getattr(value, "names", ()))  # named tensors (torch < 2.13) print names=
        or not 0 < value.numel() <= PRINT_OPTS.threshold
        or not PRINT_OPTS.edgeitems
        or _default_device_type is None
        or _default_device_type() != "cpu"
    ):
        return str(value)
    dim = value.dim()
    if dim < 2 and value.numel() == 1:  # one value: its own width, no alignment
        item = _one(value.item(), floating)
        text = _PREFIX + (item if dim == 0 else "[" + item + "]")
    else:
        text = _PREFIX + _text_of_many(value, dim, floating)
    if dtype not in (torch.get_default_dtype(), torch.int64, torch.bool):
        text = _add_suffix(text, f"dtype={dtype}")
    return text + ")"


def _one(value: float | int | bool, floating: bool) -> str:
    """The text of a lone value (what :func:`_items` gives for one value)."""
    if not floating:
        return str(value)
    if not value or not math.isfinite(value):
        return _integral(value)
    sci = PRINT_OPTS.sci_mode
    if sci is None:
        magnitude = abs(value)
        sci = magnitude > 1.0e8 or magnitude < 1.0e-4
    if sci:
        return f"{value:.{PRINT_OPTS.precision}e}"
    if value.is_integer():
        return _integral(value)
    return f"{value:.{PRINT_OPTS.precision}f}"


def _text_of_many(value: torch.Tensor, dim: int, floating: bool) -> str:
    if dim == 0:
        flat = [value.item()]
    elif dim == 1:
        flat = value.tolist()
    else:
        flat = value.reshape(-1).tolist()
    items, width = _items(flat, floating)
    if dim == 0:
        return items[0]
    return _block(iter(items), value.shape, 0, _INDENT, width)


def _items(values: list, floating: bool) -> tuple[list[str], int]:
    """Each value's text, right-aligned to one width, as torch picks notation and width.

    Floats: integral values print as ``3.``; ``sci_mode`` (or, when unset, a ratio
    above 1000 between the largest and smallest magnitude, a magnitude above 1e8 or
    below 1e-4) prints ``1.0000e-05``; else ``precision`` decimals. Only finite
    non-zero values set the width.
    """
    if not floating:
        texts = [str(v) for v in values]
        width = max(map(len, texts))
        return [t.rjust(width) for t in texts], width
    precision = PRINT_OPTS.precision
    finite = [v for v in values if v and math.isfinite(v)]
    if not finite:  # zeros and non-finite values only: the integral notation, width 1
        return [_integral(v) for v in values], 1
    magnitudes = [abs(v) for v in finite]
    low, high = min(magnitudes), max(magnitudes)
    sci = PRINT_OPTS.sci_mode
    if sci is None:
        sci = high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
    if sci:
        texts = [f"{v:.{precision}e}" for v in values]
        width = max(len(f"{v:.{precision}e}") for v in finite)
    elif all(v.is_integer() for v in finite):
        texts = [_integral(v) for v in values]
        width = max(len(f"{v:.0f}") + 1 for v in finite)
    else:
        texts = [f"{v:.{precision}f}" for v in values]
        width = max(len(f"{v:.{precision}f}") for v in finite)
    return [t.rjust(width) for t in texts], max(width, 1)


def _integral(value: float) -> str:
    text = f"{value:.0f}"
    return text + "." if math.isfinite(value) else text


def _block(items: Iterator[str], shape: torch.Size, axis: int, indent: int, width: int) -> str:
    """The bracketed text of dims ``axis:`` of ``shape``, starting at column ``indent``."""
    dim = len(shape) - axis
    if dim == 1:
        row = [next(items) for _ in range(shape[axis])]
        per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (width + 2)))
        if len(row) <= per_line:
            return "[" + ", ".join(row) + "]"
        lines = [", ".join(row[i : i + per_line]) for i in range(0, len(row), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_block(items, shape, axis + 1, indent + 1, width) for _ in range(shape[axis])]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffix(text: str, suffix: str) -> str:
    """``text, suffix`` on the last line, or on a new indented line past the line width."""
    last_line = len(text) - text.rfind("\n") + 1
    if last_line + len(suffix) + 2 > PRINT_OPTS.linewidth:
        return text + ",\n" + " " * _INDENT + suffix
    return text + ", " + suffix
