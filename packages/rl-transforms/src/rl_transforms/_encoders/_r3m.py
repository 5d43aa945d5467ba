"""``R3MTransform``: embed images with R3M's pretrained ResNet (Nair et al., 2022)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from tensordict import NestedKey

from rl_transforms._encoders._architectures import ResNetEncoder
from rl_transforms._encoders._base import EncoderTransform
from rl_transforms._encoders._weights import fetch_state_dict

_R3M_WEIGHTS = {"resnet18": "r3m_18", "resnet34": "r3m_34", "resnet50": "r3m_50"}


def convnet_state_dict(state_dict: dict, prefix: str = "module.convnet.") -> dict:
    """The ResNet part of an R3M/VIP checkpoint (torchvision names), language heads dropped."""
    return {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}


def check_download(owner: str, download: object) -> bool:
    if isinstance(download, bool):
        return download
    raise TypeError(
        f"{owner} expected download=True (the published weights) or False (random weights), "
        f"got {download!r}. torchvision's ImageNet weights are not offered: torchvision is "
        f"not a dependency of rl-transforms."
    )


def embedding_keys(prefix: str, in_keys: Sequence[NestedKey], stack_images: bool) -> list[str]:
    """The default out_keys of a ResNet encoder: one embedding, or one per image."""
    if stack_images or len(in_keys) == 1:
        return [f"{prefix}_vec"]
    return [f"{prefix}_vec_{i}" for i in range(len(in_keys))]


def load_resnet_weights(
    network: ResNetEncoder, url: str, dir_prefix: str | os.PathLike | None, owner: str
) -> None:
    """Download (once, into ``dir_prefix``) a published R3M/VIP checkpoint into ``network``."""
    state = fetch_state_dict(url, dir_prefix, owner=owner)
    network.load_torchvision_state_dict(convnet_state_dict(state), owner)


class R3MTransform(EncoderTransform):
    """R3M Transform class.

    R3M ("R3M: A Universal Visual Representation for Robot Manipulation", Nair,
    Rajeswaran, Kumar, Finn, Gupta, 2022, https://arxiv.org/abs/2203.12601) is a
    ResNet trained on Ego4D. Images ``(*batch, H, W, 3)`` (``uint8`` or floats in
    ``[0, 1]``) are scaled to ``[0, 1]``, resized to ``size`` x ``size``,
    normalised with the ImageNet mean and std and embedded into vectors of 512
    (ResNet-18/34) or 2048 (ResNet-50) floats. Needs ``pip install 'rl-transforms[vision]'``.

    Args:
        model_name (str): ``"resnet18"``, ``"resnet34"`` or ``"resnet50"``.
        in_keys (sequence of NestedKey, optional): the images. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): the embeddings. Defaults to
            ``["r3m_vec"]`` (``["r3m_vec_0", ...]`` when ``stack_images=False``).
        size (int, optional): the side of the images fed to the network. Defaults to ``244``.
        stack_images (bool, optional): with several ``in_keys``, write one embedding
            (the images' embeddings concatenated) instead of one per image. Defaults to ``True``.
        download (bool, optional): download the published R3M weights (once, into
            ``download_path``); else the network keeps random weights. Defaults to ``False``.
        download_path (str, optional): the weights cache. Defaults to ``None``
            (``<torch hub dir>/checkpoints``).
        tensor_pixels_keys (sequence of NestedKey, optional): keep the input images
            under these keys. Defaults to ``None`` (images are removed).
        requires_grad (bool, optional): let gradients flow through the encoder (to
            fine-tune it). Defaults to ``False``.

    Raises:
        ValueError: for an unknown ``model_name`` or mismatched keys; at call time
            for images that are not ``(*batch, H, W, 3)``.
        TypeError: for images that are neither ``uint8`` nor floating point.
        ImportError: if ``transformers`` (extra ``vision``) is not installed.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> r3m = R3MTransform("resnet18", in_keys=["pixels"], size=64)
        >>> frames = torch.randint(0, 256, (2, 64, 64, 3), dtype=torch.uint8)
        >>> out = r3m(TensorDict(pixels=frames, batch_size=[2]))
        >>> out["r3m_vec"].shape, "pixels" in out.keys()
        (torch.Size([2, 512]), False)
    """

    def __init__(
        self,
        model_name: str,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download: bool = False,
        download_path: str | os.PathLike | None = None,
        tensor_pixels_keys: Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
    ) -> None:
        owner = type(self).__name__
        download = check_download(owner, download)
        in_keys = list(in_keys) if in_keys else ["pixels"]
        out_keys = out_keys or embedding_keys("r3m", in_keys, stack_images)
        network = ResNetEncoder(model_name, owner=owner)
        super().__init__(
            network,
            in_keys=in_keys,
            out_keys=out_keys,
            size=size,
            stack_images=stack_images,
            tensor_pixels_keys=tensor_pixels_keys,
            requires_grad=requires_grad,
        )
        self.model_name = model_name
        self.download_path = download_path
        if download:
            self.load_weights(download_path)

    def load_weights(self, dir_prefix: str | os.PathLike | None = None) -> None:
        """Download (once, into ``dir_prefix``) and load the published R3M weights."""
        load_resnet_weights(
            self.network, _R3M_WEIGHTS[self.model_name], dir_prefix, type(self).__name__
        )
