"""The encoder transforms without their backend: an ImportError naming the extra."""

from __future__ import annotations

import sys

import pytest

from rl_transforms import R3MTransform, VC1Transform, VIPRewardTransform, VIPTransform


@pytest.mark.parametrize(
    "build",
    [
        lambda: R3MTransform("resnet18"),
        lambda: VIPTransform("resnet50"),
        lambda: VIPRewardTransform("resnet50"),
        lambda: VC1Transform(["pixels"], ["VC1_vec"], "default"),
    ],
)
def test_missing_transformers_names_the_vision_extra(monkeypatch, build):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    with pytest.raises(
        ImportError, match=r"needs transformers.*pip install 'rl-transforms\[vision\]'"
    ):
        build()
