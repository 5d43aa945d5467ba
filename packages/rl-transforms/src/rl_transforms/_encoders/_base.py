"""The part the visual-encoder transforms share: check images, preprocess, embed.

Images come as envs render them: ``(*batch, H, W, 3)`` channels last, ``uint8`` in
``[0, 255]`` or floating point in ``[0, 1]``. They are moved to channels first,
scaled to ``[0, 1]``, resized (and cropped) as the publication does, normalised
with the ImageNet statistics and embedded; leading dims are flattened for the
network and restored on the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tensordict import NestedKey, TensorDictBase
from torch import nn

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Composite, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import spec_del, spec_get

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class EncoderTransform(Transform):
    """Embed the images at ``in_keys`` with ``network`` into ``out_keys``.

    With several ``in_keys`` and ``stack_images``, the embeddings are concatenated
    into the single ``out_keys[0]``. The images are removed unless kept under
    ``tensor_pixels_keys`` (or ``del_keys=False``).
    """

    def __init__(
        self,
        network: nn.Module,
        *,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        size: int,
        crop: int | None = None,
        stack_images: bool = True,
        del_keys: bool = True,
        tensor_pixels_keys: Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
    ) -> None:
        owner = type(self).__name__
        in_keys, out_keys = list(in_keys), list(out_keys)
        if stack_images and len(in_keys) > 1 and len(out_keys) != 1:
            raise ValueError(
                f"{owner} with stack_images=True writes one embedding for all images and "
                f"expected one out_key, got out_keys={out_keys}. Pass a single out_key or "
                f"stack_images=False."
            )
        if not (stack_images and len(in_keys) > 1) and len(out_keys) != len(in_keys):
            raise ValueError(
                f"{owner} expected one out_key per in_key, got in_keys={in_keys} and "
                f"out_keys={out_keys}."
            )
        if tensor_pixels_keys is not None and len(tensor_pixels_keys) != len(in_keys):
            raise ValueError(
                f"{owner} expected one tensor_pixels_key per in_key, got "
                f"tensor_pixels_keys={list(tensor_pixels_keys)} for in_keys={in_keys}."
            )
        super().__init__()
        self._in_keys, self._out_keys = in_keys, out_keys
        self.network = network
        self.size = int(size)
        self.crop = crop
        self.stack_images = stack_images and len(in_keys) > 1
        self.del_keys = del_keys
        self.tensor_pixels_keys = list(tensor_pixels_keys) if tensor_pixels_keys else []
        self.requires_grad = requires_grad
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).reshape(3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD).reshape(3, 1, 1))
        network.eval()
        network.requires_grad_(requires_grad)

    @property
    def outdim(self) -> int:
        """The size of one embedding."""
        return self.network.out_features

    # ------------------------------------------------------------------ images
    def _check(self, key: NestedKey, image: torch.Tensor) -> None:
        if image.dim() < 3 or image.shape[-1] != 3:
            raise ValueError(
                f"{type(self).__name__} expected images at {key!r} of shape (*batch, H, W, 3) "
                f"(channels last, RGB), found shape {tuple(image.shape)}. Give the env's "
                f"rendered frames; move channels last with PermuteTransform if needed."
            )
        if image.dtype != torch.uint8 and not image.is_floating_point():
            raise TypeError(
                f"{type(self).__name__} expected images at {key!r} of dtype torch.uint8 (0-255) "
                f"or floating point (0-1), found {image.dtype}. Cast the images first."
            )

    def preprocess(self, image: torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` images to the normalised ``(N, 3, size, size)`` network input."""
        x = image.permute(0, 3, 1, 2)
        x = x.float().div_(255.0) if x.dtype == torch.uint8 else x.to(self.mean.dtype)
        if self.crop is not None:  # resize the shorter side, then center-crop (VC-1)
            h, w = x.shape[-2:]
            if min(h, w) != self.size:
                scale = self.size / min(h, w)
                x = F.interpolate(
                    x, size=(round(h * scale), round(w * scale)), mode="bilinear", antialias=True
                )
            h, w = x.shape[-2:]
            top, left = (h - self.crop) // 2, (w - self.crop) // 2
            x = x[..., top : top + self.crop, left : left + self.crop]
        elif tuple(x.shape[-2:]) != (self.size, self.size):
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True)
        return (x - self.mean) / self.std

    def embed(self, image: torch.Tensor) -> torch.Tensor:
        """Embed images of shape ``(*batch, H, W, 3)`` into ``(*batch, outdim)``."""
        batch = image.shape[:-3]
        flat = image.reshape(-1, *image.shape[-3:])
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            out = self.network(self.preprocess(flat))
        return out.reshape(*batch, out.shape[-1])

    # ------------------------------------------------------------------ data
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        embeddings = []
        for i, key in enumerate(self.in_keys):
            image = read(next_tensordict, key)
            if image is None:
                if self.missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__} expected images at {key!r}, found no such entry. "
                    f"Available keys: {sorted(map(str, next_tensordict.keys(True, True)))}."
                )
            self._check(key, image)
            if self.tensor_pixels_keys:
                write(next_tensordict, self.tensor_pixels_keys[i], image)
            embeddings.append(self.embed(image))
        if not embeddings:
            return next_tensordict
        if self.stack_images:
            write(next_tensordict, self.out_keys[0], torch.cat(embeddings, -1))
        else:
            for key, value in zip(self.out_keys, embeddings):
                write(next_tensordict, key, value)
        if self.del_keys:
            keep = set(self.out_keys) | set(self.tensor_pixels_keys)
            drop = [k for k in self.in_keys if k not in keep]
            if drop:
                next_tensordict.exclude(*drop, inplace=True)
        return next_tensordict

    # ------------------------------------------------------------------ specs
    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        specs = [spec_get(observation_spec, key) for key in self.in_keys]
        present = [s for s in specs if s is not None]
        if not present:
            return observation_spec
        first = present[0]
        batch = first.shape[:-3]
        for key, spec in zip(self.in_keys, specs):
            if spec is not None and self.tensor_pixels_keys:
                observation_spec[self.tensor_pixels_keys[self.in_keys.index(key)]] = spec.clone()
        if self.del_keys:
            for key, spec in zip(self.in_keys, specs):
                if spec is not None and key not in self.out_keys:
                    spec_del(observation_spec, key)
        width = self.outdim * (len(self.in_keys) if self.stack_images else 1)
        for key in self.out_keys:
            observation_spec[key] = Unbounded(
                shape=(*batch, width), dtype=torch.float32, device=first.device
            )
        return observation_spec
