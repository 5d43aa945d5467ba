"""The published encoder architectures, built with ``transformers`` (extra ``vision``).

R3M and VIP are torchvision ResNets (v1.5) whose checkpoints use torchvision's
parameter names; VC-1 is an MAE ViT whose checkpoint uses timm's names. The models
are ``transformers``' ``ResNetModel`` / ``ViTModel`` (same computation), and the
checkpoints are renamed on load. ``transformers`` is imported when a model is built.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from rl_transforms._backends import require

VISION = "vision"

#: name -> (block type, blocks per stage, channels per stage, feature size)
RESNETS: dict[str, tuple[str, list[int], list[int], int]] = {
    "resnet18": ("basic", [2, 2, 2, 2], [64, 128, 256, 512], 512),
    "resnet34": ("basic", [3, 4, 6, 3], [64, 128, 256, 512], 512),
    "resnet50": ("bottleneck", [3, 4, 6, 3], [256, 512, 1024, 2048], 2048),
}

#: name -> (width, depth, heads)
VITS: dict[str, tuple[int, int, int]] = {
    "vit_base_patch16": (768, 12, 12),
    "vit_large_patch16": (1024, 24, 16),
}


class ResNetEncoder(nn.Module):
    """A ResNet trunk (global-average pooled features), optionally followed by a linear head."""

    def __init__(self, name: str, *, head: int | None = None, owner: str) -> None:
        if name not in RESNETS:
            raise ValueError(f"{owner} expected model_name in {sorted(RESNETS)}, got {name!r}.")
        transformers = require("transformers", owner=owner, extra=VISION)
        layer_type, depths, sizes, features = RESNETS[name]
        super().__init__()
        config = transformers.ResNetConfig(
            num_channels=3,
            embedding_size=64,
            hidden_sizes=sizes,
            depths=depths,
            layer_type=layer_type,
            hidden_act="relu",
            downsample_in_first_stage=False,
        )
        self.trunk = transformers.ResNetModel(config)
        self.head = nn.Linear(features, head) if head is not None else None
        self.out_features = head if head is not None else features

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.trunk(pixel_values=images).pooler_output.flatten(1)
        return self.head(features) if self.head is not None else features

    def load_torchvision_state_dict(self, state_dict: dict[str, torch.Tensor], owner: str) -> None:
        """Load parameters named as torchvision's ``resnet*`` (``conv1.weight``, ``layer1.0...``)."""
        trunk, head = {}, {}
        for key, value in state_dict.items():
            if key.startswith("fc."):
                head[key[3:]] = value
            else:
                trunk[_torchvision_to_hf(key)] = value
        _load(self.trunk, trunk, owner)
        if self.head is not None:
            _load(self.head, head, owner)


def _torchvision_to_hf(key: str) -> str:
    match = re.fullmatch(r"(conv1|bn1)\.(.+)", key)
    if match:
        part = "convolution" if match[1] == "conv1" else "normalization"
        return f"embedder.embedder.{part}.{match[2]}"
    match = re.fullmatch(r"layer(\d)\.(\d+)\.(conv|bn)(\d)\.(.+)", key)
    if match:
        part = "convolution" if match[3] == "conv" else "normalization"
        return (
            f"encoder.stages.{int(match[1]) - 1}.layers.{match[2]}.layer."
            f"{int(match[4]) - 1}.{part}.{match[5]}"
        )
    match = re.fullmatch(r"layer(\d)\.(\d+)\.downsample\.([01])\.(.+)", key)
    if match:
        part = "convolution" if match[3] == "0" else "normalization"
        return f"encoder.stages.{int(match[1]) - 1}.layers.{match[2]}.shortcut.{part}.{match[4]}"
    return key  # unknown: reported by _load


class ViTEncoder(nn.Module):
    """A ViT/16 whose output is the class token after the final norm (MAE, ``use_cls``)."""

    def __init__(self, name: str, *, owner: str, image_size: int = 224) -> None:
        if name not in VITS:
            raise ValueError(f"{owner} expected a ViT in {sorted(VITS)}, got {name!r}.")
        transformers = require("transformers", owner=owner, extra=VISION)
        width, depth, heads = VITS[name]
        super().__init__()
        config = transformers.ViTConfig(
            hidden_size=width,
            num_hidden_layers=depth,
            num_attention_heads=heads,
            intermediate_size=4 * width,
            hidden_act="gelu",
            layer_norm_eps=1e-6,
            image_size=image_size,
            patch_size=16,
            num_channels=3,
            qkv_bias=True,
        )
        self.vit = transformers.ViTModel(config, add_pooling_layer=False)
        self.out_features = width

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=images).last_hidden_state[:, 0]

    def load_timm_state_dict(self, state_dict: dict[str, torch.Tensor], owner: str) -> None:
        """Load an MAE/timm ViT state dict (``blocks.0.attn.qkv.weight``, ...); the decoder is dropped."""
        out: dict[str, torch.Tensor] = {}
        for key, value in state_dict.items():
            if key.startswith(("decoder", "mask_token")):
                continue
            match = re.fullmatch(r"blocks\.(\d+)\.attn\.qkv\.(weight|bias)", key)
            if match:
                for part, chunk in zip(("q_proj", "k_proj", "v_proj"), value.chunk(3, 0)):
                    out[f"layers.{match[1]}.attention.{part}.{match[2]}"] = chunk
                continue
            out[_timm_to_hf(key)] = value
        _load(self.vit, out, owner)


_TIMM = [
    (r"cls_token", "embeddings.cls_token"),
    (r"pos_embed", "embeddings.position_embeddings"),
    (r"patch_embed\.proj\.(.+)", r"embeddings.patch_embeddings.projection.\1"),
    (r"blocks\.(\d+)\.norm1\.(.+)", r"layers.\1.layernorm_before.\2"),
    (r"blocks\.(\d+)\.norm2\.(.+)", r"layers.\1.layernorm_after.\2"),
    (r"blocks\.(\d+)\.attn\.proj\.(.+)", r"layers.\1.attention.o_proj.\2"),
    (r"blocks\.(\d+)\.mlp\.(fc[12])\.(.+)", r"layers.\1.mlp.\2.\3"),
    (r"norm\.(.+)", r"layernorm.\1"),
]


def _timm_to_hf(key: str) -> str:
    for pattern, replacement in _TIMM:
        if re.fullmatch(pattern, key):
            return re.sub(pattern, replacement, key)
    return key


def _load(module: nn.Module, state_dict: dict[str, torch.Tensor], owner: str) -> None:
    own = module.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    wrong = [
        f"{k}: expected {tuple(own[k].shape)}, found {tuple(v.shape)}"
        for k, v in state_dict.items()
        if k in own and own[k].shape != v.shape
    ]
    if missing or unexpected or wrong:
        raise ValueError(
            f"{owner} could not load the checkpoint into {type(module).__name__}: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
            f"{unexpected[:5]}{'...' if len(unexpected) > 5 else ''}, wrong shapes {wrong[:5]}. "
            f"Check that model_name matches the checkpoint."
        )
    module.load_state_dict(state_dict)
