"""``VC1Transform``: embed images with VC-1, the pretrained ViT of Majumdar et al. (2023)."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict import NestedKey

from rl_transforms._encoders._architectures import ViTEncoder
from rl_transforms._encoders._base import EncoderTransform
from rl_transforms._encoders._weights import fetch_state_dict

#: model_name -> (architecture, published checkpoint or None for random weights)
_VC1_MODELS = {
    "base": ("vit_base_patch16", "vc1_base"),
    "large": ("vit_large_patch16", "vc1_large"),
    "default": ("vit_base_patch16", None),
}


class VC1Transform(EncoderTransform):
    """VC1 Transform class.

    VC-1 ("Where are we in the search for an Artificial Visual Cortex for Embodied
    Intelligence?", Majumdar et al., 2023, https://arxiv.org/abs/2303.18240) is a
    ViT/16 trained with masked auto-encoding on egocentric and navigation videos
    and ImageNet. As published, images ``(*batch, H, W, 3)`` are scaled to
    ``[0, 1]``, resized (shorter side 224), center-cropped to 224 x 224 and
    normalised with the ImageNet mean and std; the embedding is the class token
    after the final norm (768 floats for ``"base"``, 1024 for ``"large"``). Needs
    ``pip install 'rl-transforms[vision]'``.

    Args:
        in_keys (sequence of NestedKey): the images. ``None`` or empty gives ``["pixels"]``.
        out_keys (sequence of NestedKey): the embeddings. ``None`` or empty gives ``["VC1_vec"]``.
        model_name (str): ``"base"`` or ``"large"`` (the published weights, downloaded
            once into ``<torch hub dir>/checkpoints``), or ``"default"``: the base
            architecture with random weights, for tests.
        del_keys (bool, optional): remove the images from the output. Defaults to ``True``.

    Raises:
        ValueError: for an unknown ``model_name`` or mismatched keys; at call time
            for images that are not ``(*batch, H, W, 3)``.
        TypeError: for images that are neither ``uint8`` nor floating point.
        ImportError: if ``transformers`` (extra ``vision``) is not installed.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> vc1 = VC1Transform(["pixels"], ["VC1_vec"], "default")
        >>> frames = torch.randint(0, 256, (2, 240, 320, 3), dtype=torch.uint8)
        >>> vc1(TensorDict(pixels=frames, batch_size=[2]))["VC1_vec"].shape
        torch.Size([2, 768])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None,
        out_keys: Sequence[NestedKey] | None,
        model_name: str,
        del_keys: bool = True,
    ) -> None:
        owner = type(self).__name__
        if model_name not in _VC1_MODELS:
            raise ValueError(
                f"{owner} expected model_name in {sorted(_VC1_MODELS)}, got {model_name!r}."
            )
        architecture, weights = _VC1_MODELS[model_name]
        in_keys = list(in_keys) if in_keys else ["pixels"]
        out_keys = list(out_keys) if out_keys else ["VC1_vec"]
        network = ViTEncoder(architecture, owner=owner)
        super().__init__(
            network,
            in_keys=in_keys,
            out_keys=out_keys,
            size=224,
            crop=224,
            stack_images=False,
            del_keys=del_keys,
        )
        self.model_name = model_name
        if weights is not None:
            self.network.load_timm_state_dict(fetch_state_dict(weights, owner=owner), owner)

    @property
    def embd_size(self) -> int:
        """The size of one embedding."""
        return self.outdim
