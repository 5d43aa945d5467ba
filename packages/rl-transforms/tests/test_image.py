"""ToTensorImage, Resize, GrayScale, CenterCrop, Crop: uint8/float, both layouts, with/without batch."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import check_env_specs
from rl_specs import Bounded
from rl_transforms import (
    CenterCrop,
    Compose,
    Crop,
    GrayScale,
    Resize,
    ToTensorImage,
    TransformedEnv,
)

LAYOUTS = [(False, (3, 8, 8)), (True, (8, 8, 3))]
DTYPES = [torch.uint8, torch.float32]
BATCHES = [(), (2,), (2, 3)]


def _image(batch, shape, dtype):
    image = torch.randint(0, 256, (*batch, *shape)).to(dtype)
    return TensorDict({"pixels": image}, batch)


class TestResize:
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("last, shape", LAYOUTS)
    @pytest.mark.parametrize("batch", BATCHES)
    def test_shapes_and_dtypes(self, dtype, last, shape, batch):
        out = Resize(4, 6)(_image(batch, shape, dtype))["pixels"]
        expected = (4, 6, 3) if last else (3, 4, 6)
        assert out.shape == torch.Size([*batch, *expected]) and out.dtype == dtype

    def test_constant_image_stays_constant(self):
        out = Resize(3, interpolation="nearest")(
            TensorDict({"pixels": torch.full((1, 6, 6), 7, dtype=torch.uint8)})
        )
        assert (out["pixels"] == 7).all()

    def test_bad_interpolation_raises(self):
        with pytest.raises(ValueError, match=r"Resize expected interpolation in"):
            Resize(4, interpolation="lanczos")

    def test_low_rank_input_raises(self):
        with pytest.raises(ValueError, match=r"Resize expected an image with at least 3 dims"):
            Resize(4)(TensorDict({"pixels": torch.zeros(4, 4)}))

    def test_check_env_specs(self, continuous_env):
        env = TransformedEnv(continuous_env(batch_size=[2], pixels=True), Resize(4, 4))
        spec = env.observation_spec["pixels"]
        assert (
            isinstance(spec, Bounded)
            and spec.shape == torch.Size([2, 4, 4, 3])
            and spec.dtype == torch.uint8
        )
        check_env_specs(env)


class TestCenterCrop:
    @pytest.mark.parametrize("last, shape", LAYOUTS)
    @pytest.mark.parametrize("batch", BATCHES)
    def test_shapes(self, last, shape, batch):
        out = CenterCrop(4, 2)(_image(batch, shape, torch.uint8))["pixels"]
        assert out.shape == torch.Size([*batch, *((4, 2, 3) if last else (3, 4, 2))])

    def test_takes_the_center(self):
        img = torch.arange(16.0).reshape(1, 4, 4)
        assert CenterCrop(2)(TensorDict({"pixels": img}))["pixels"].flatten().tolist() == [
            5.0,
            6.0,
            9.0,
            10.0,
        ]

    def test_window_too_large_raises(self):
        with pytest.raises(ValueError, match=r"CenterCrop cannot crop 9x9"):
            CenterCrop(9)(TensorDict({"pixels": torch.zeros(3, 8, 8)}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(TransformedEnv(continuous_env(pixels=True), CenterCrop(4)))


class TestCrop:
    def test_window_position(self):
        img = torch.arange(16.0).reshape(1, 4, 4)
        out = Crop(2, 3, top=1, left=1)(TensorDict({"pixels": img}))["pixels"]
        assert out.flatten().tolist() == [5.0, 6.0, 7.0, 9.0, 10.0, 11.0]

    def test_outside_window_raises(self):
        with pytest.raises(ValueError, match=r"Crop cannot crop 4x4"):
            Crop(4, top=6)(TensorDict({"pixels": torch.zeros(3, 8, 8)}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(
            TransformedEnv(continuous_env(batch_size=[2], pixels=True), Crop(3, 5, top=2, left=1))
        )


class TestGrayScale:
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("last, shape", LAYOUTS)
    @pytest.mark.parametrize("batch", BATCHES)
    def test_shapes_and_dtypes(self, dtype, last, shape, batch):
        out = GrayScale()(_image(batch, shape, dtype))["pixels"]
        assert (
            out.shape == torch.Size([*batch, *((8, 8, 1) if last else (1, 8, 8))])
            and out.dtype == dtype
        )

    def test_white_stays_white(self):
        out = GrayScale()(TensorDict({"pixels": torch.full((3, 2, 2), 255, dtype=torch.uint8)}))[
            "pixels"
        ]
        assert (out == 255).all()

    def test_two_channels_raise(self):
        with pytest.raises(
            ValueError, match=r"GrayScale expected 3 \(RGB\) or 4 \(RGBA\) channels, got 2"
        ):
            GrayScale()(TensorDict({"pixels": torch.zeros(2, 5, 5)}))

    def test_check_env_specs(self, continuous_env):
        check_env_specs(TransformedEnv(continuous_env(pixels=True), GrayScale()))


class TestToTensorImage:
    def test_output_dtype_defaults_to_the_default_dtype(self):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            t = ToTensorImage()
        finally:
            torch.set_default_dtype(previous)

        def image():
            return TensorDict({"pixels": torch.zeros(4, 5, 3, dtype=torch.uint8)})

        assert t(image())["pixels"].dtype == torch.float64
        assert ToTensorImage()(image())["pixels"].dtype == previous

    @pytest.mark.parametrize("batch", BATCHES)
    def test_uint8_channels_last_to_float_channels_first(self, batch):
        out = ToTensorImage()(_image(batch, (8, 8, 3), torch.uint8))["pixels"]
        assert out.shape == torch.Size([*batch, 3, 8, 8]) and out.dtype == torch.float32
        assert out.max() <= 1.0

    def test_float_input_not_rescaled(self):
        out = ToTensorImage()(TensorDict({"pixels": torch.full((2, 2, 3), 4.0)}))["pixels"]
        assert out.max().item() == 4.0

    def test_unsqueeze_and_dtype(self):
        out = ToTensorImage(unsqueeze=True, dtype=torch.float64)(
            TensorDict({"pixels": torch.zeros(4, 4, 3, dtype=torch.uint8)})
        )["pixels"]
        assert out.shape == torch.Size([1, 3, 4, 4]) and out.dtype == torch.float64

    def test_shape_tolerant_keeps_channels_first(self):
        out = ToTensorImage(shape_tolerant=True)(
            TensorDict({"pixels": torch.zeros(3, 8, 8, dtype=torch.uint8)})
        )
        assert out["pixels"].shape == torch.Size([3, 8, 8])

    def test_check_env_specs(self, continuous_env):
        env = TransformedEnv(
            continuous_env(batch_size=[2], pixels=True),
            Compose(ToTensorImage(), Resize(4), GrayScale()),
        )
        spec = env.observation_spec["pixels"]
        assert spec.shape == torch.Size([2, 1, 4, 4]) and spec.dtype == torch.float32
        check_env_specs(env)
