"""Image transforms in plain torch: :class:`ToTensorImage`, :class:`Resize`,
:class:`GrayScale`, :class:`CenterCrop` and :class:`Crop`.

Images are ``[..., C, H, W]`` (channels-first) or ``[..., H, W, C]`` (channels-last,
recognised when the last dim has 1, 3 or 4 channels and the third-to-last does not),
with any number of leading batch dims. ``uint8`` images stay ``uint8`` (values are
rounded and clamped); floating images keep their dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rl_specs import Bounded, TensorSpec
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg
from rl_transforms._spec_ops import map_spec

_CHANNELS = (1, 3, 4)
_MODES = {
    "bilinear": "bilinear",
    "nearest": "nearest",
    "bicubic": "bicubic",
    "area": "area",
    "nearest-exact": "nearest-exact",
}
_GRAY_WEIGHTS = (0.2989, 0.587, 0.114)


def is_channels_last(image: torch.Tensor) -> bool:
    """Whether ``image`` is ``[..., H, W, C]`` (see the module docstring)."""
    return image.ndim >= 3 and image.shape[-1] in _CHANNELS and image.shape[-3] not in _CHANNELS


def _pixel_keys(in_keys: KeyArg) -> KeyArg:
    return in_keys if in_keys is not None else ["pixels"]


def _restore_dtype(result: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.uint8:
        return result.round().clamp(0, 255).to(torch.uint8)
    return result.to(dtype)


class _ImageTransform(Transform):
    """Run the subclass's ``_chw`` on a channels-first view; restore the layout and dtype."""

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.ndim < 3:
            raise ValueError(
                f"{type(self).__name__} expected an image with at least 3 dims ([..., C, H, W] "
                f"or [..., H, W, C]), got shape {tuple(obs.shape)}."
            )
        last = is_channels_last(obs)
        image = obs.movedim(-1, -3) if last else obs
        out = self._chw(image)  # type: ignore[attr-defined] - defined by every subclass
        return out.movedim(-3, -1) if last else out

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return map_spec(spec, self._apply_transform)


class Resize(_ImageTransform):
    """Resizes a pixel observation.

    Args:
        w (int): the output size of dim ``-2`` (of the channels-first image).
        h (int, optional): the output size of dim ``-1``. Defaults to ``w``.
        interpolation (str, optional): ``"bilinear"``, ``"nearest"``, ``"bicubic"``,
            ``"area"`` or ``"nearest-exact"``. Defaults to ``"bilinear"``.
        in_keys (sequence of NestedKey, optional): images to resize. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Raises:
        ValueError: if ``interpolation`` is unknown.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = Resize(4, 6)
        >>> t(TensorDict({"pixels": torch.zeros(2, 3, 8, 8, dtype=torch.uint8)}, [2]))["pixels"].shape
        torch.Size([2, 3, 4, 6])
        >>> t(TensorDict({"pixels": torch.zeros(8, 8, 3)}))["pixels"].shape
        torch.Size([4, 6, 3])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
    ) -> None:
        if interpolation not in _MODES:
            raise ValueError(
                f"Resize expected interpolation in {sorted(_MODES)}, got {interpolation!r}."
            )
        super().__init__(_pixel_keys(in_keys), out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else int(w)
        self.interpolation = interpolation

    def _chw(self, image: torch.Tensor) -> torch.Tensor:
        lead = image.shape[:-3]
        flat = image.reshape(-1, *image.shape[-3:])
        mode = _MODES[self.interpolation]
        kwargs = {"align_corners": False} if mode in ("bilinear", "bicubic") else {}
        out = F.interpolate(flat.float(), size=(self.w, self.h), mode=mode, **kwargs)
        return _restore_dtype(out, image.dtype).reshape(*lead, *out.shape[-3:])

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Bounded):
            low, high = spec.low.flatten()[0], spec.high.flatten()[0]
            shape = self._apply_transform(torch.zeros(tuple(spec.shape), device="meta")).shape
            return Bounded(
                low=low.item(), high=high.item(), shape=shape, dtype=spec.dtype, device=spec.device
            )
        return super()._transform_spec(spec)

    def __repr__(self) -> str:
        return f"Resize(w={self.w}, h={self.h}, interpolation={self.interpolation!r}, in_keys={self.in_keys})"


class CenterCrop(_ImageTransform):
    """Crops the center of an image.

    Args:
        w (int): the output size of dim ``-2``.
        h (int, optional): the output size of dim ``-1``. Defaults to ``w``.
        in_keys (sequence of NestedKey, optional): images to crop. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> img = torch.arange(16.0).reshape(1, 4, 4)
        >>> CenterCrop(2)(TensorDict({"pixels": img}))["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(
        self, w: int, h: int | None = None, in_keys: KeyArg = None, out_keys: KeyArg = None
    ) -> None:
        super().__init__(_pixel_keys(in_keys), out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else int(w)

    def _window(self, image: torch.Tensor) -> tuple[int, int]:
        return (image.shape[-2] - self.w) // 2, (image.shape[-1] - self.h) // 2

    def _chw(self, image: torch.Tensor) -> torch.Tensor:
        top, left = self._window(image)
        if top < 0 or left < 0:
            raise ValueError(
                f"{type(self).__name__} cannot crop {self.w}x{self.h} out of an image of "
                f"{image.shape[-2]}x{image.shape[-1]}; pick a smaller window."
            )
        return image[..., top : top + self.w, left : left + self.h]


class Crop(CenterCrop):
    """Crops the input image at the specified location and output size.

    Args:
        w (int): the output size of dim ``-2``.
        h (int, optional): the output size of dim ``-1``. Defaults to ``w``.
        top (int, optional): first row kept. Defaults to ``0``.
        left (int, optional): first column kept. Defaults to ``0``.
        in_keys (sequence of NestedKey, optional): images to crop. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Raises:
        ValueError: if the window falls outside the image.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> img = torch.arange(16.0).reshape(1, 4, 4)
        >>> Crop(2, top=1, left=2)(TensorDict({"pixels": img}))["pixels"]
        tensor([[[ 6.,  7.],
                 [10., 11.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        top: int = 0,
        left: int = 0,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
    ) -> None:
        super().__init__(w, h, in_keys, out_keys)
        self.top = int(top)
        self.left = int(left)

    def _window(self, image: torch.Tensor) -> tuple[int, int]:
        if self.top + self.w > image.shape[-2] or self.left + self.h > image.shape[-1]:
            return -1, -1
        return self.top, self.left


class GrayScale(_ImageTransform):
    """Turns a pixel observation to grayscale.

    Args:
        in_keys (sequence of NestedKey, optional): RGB images. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> GrayScale()(TensorDict({"pixels": torch.ones(3, 2, 2)}))["pixels"].shape
        torch.Size([1, 2, 2])
    """

    def __init__(self, in_keys: KeyArg = None, out_keys: KeyArg = None) -> None:
        super().__init__(_pixel_keys(in_keys), out_keys)

    def _chw(self, image: torch.Tensor) -> torch.Tensor:
        if image.shape[-3] == 1:
            return image.clone()
        if image.shape[-3] < 3:
            raise ValueError(
                f"GrayScale expected 3 (RGB) or 4 (RGBA) channels, got {image.shape[-3]} in an "
                f"image of shape {tuple(image.shape)}."
            )
        weights = torch.tensor(_GRAY_WEIGHTS, device=image.device).reshape(3, 1, 1)
        gray = (image[..., :3, :, :].float() * weights).sum(-3, keepdim=True)
        return _restore_dtype(gray, image.dtype)


class ToTensorImage(Transform):
    """Transforms a numpy-like image (W x H x C) to a pytorch image (C x W x H).

    Args:
        from_int (bool, optional): divide by 255. Defaults to ``None`` (when the input is
            not floating).
        unsqueeze (bool, optional): add a leading dim to images without batch dims.
            Defaults to ``False``.
        dtype (torch.dtype, optional): the output dtype. Defaults to the default dtype
            when the transform is built (``torch.get_default_dtype()``).

    Keyword Args:
        in_keys (sequence of NestedKey, optional): images. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        shape_tolerant (bool, optional): leave channels-first inputs unpermuted.
            Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> out = ToTensorImage()(TensorDict({"pixels": torch.full((4, 5, 3), 255, dtype=torch.uint8)}))
        >>> out["pixels"].shape, out["pixels"].dtype, out["pixels"].max().item()
        (torch.Size([3, 4, 5]), torch.float32, 1.0)
    """

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.dtype | None = None,
        *,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        shape_tolerant: bool = False,
    ) -> None:
        super().__init__(_pixel_keys(in_keys), out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = dtype if dtype is not None else torch.get_default_dtype()
        self.shape_tolerant = shape_tolerant

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        if not (
            self.shape_tolerant and obs.shape[-3] in _CHANNELS and obs.shape[-1] not in _CHANNELS
        ):
            obs = obs.movedim(-1, -3)
        from_int = self.from_int if self.from_int is not None else not obs.is_floating_point()
        out = obs.to(self.dtype)
        if from_int:
            out = out / 255
        if self.unsqueeze and out.ndim == 3:
            out = out.unsqueeze(0)
        return out

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        from_int = self.from_int if self.from_int is not None else not spec.dtype.is_floating_point
        if isinstance(spec, Bounded) and from_int:
            shape = self._apply_transform(torch.zeros(tuple(spec.shape), device="meta")).shape
            return Bounded(low=0.0, high=1.0, shape=shape, dtype=self.dtype, device=spec.device)
        return map_spec(spec, self._apply_transform, dtype=self.dtype)
