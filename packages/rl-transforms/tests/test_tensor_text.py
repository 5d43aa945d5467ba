"""tensor_text: the text str(tensor) writes, built without torch's printing operations."""

from __future__ import annotations

import math
import random

import pytest
import torch

from rl_transforms._tensor_text import tensor_text

SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-5, 1e-4, 0.5, -3.0, 999.0, 1000.0]
SPECIAL += [123456.0, 1e8, 1e9, 2.0**60, 1.0]
SHAPES = [(), (1,), (3,), (20,), (40,), (2, 3), (3, 1, 4), (2, 2, 2, 2), (10, 12), (4, 30), (1000,)]
INTEGERS = {torch.int8: 127, torch.int16: 30_000, torch.int32: 2**31 - 1, torch.int64: 10**12}


def _random_tensor(rng: random.Random) -> torch.Tensor:
    shape = rng.choice(SHAPES)
    numel = math.prod(shape)
    dtype = rng.choice([torch.float32, torch.float64, torch.bool, torch.uint8, *INTEGERS])
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    if dtype.is_floating_point:
        mode = rng.random()
        if mode < 0.3:
            return torch.randn(shape, dtype=dtype, generator=gen) * 10 ** rng.randint(-6, 9)
        if mode < 0.6:
            whole = torch.randint(-1000, 1000, shape, generator=gen).to(dtype)
            return whole * rng.choice([1, 1000, 1e6])
        return torch.tensor([rng.choice(SPECIAL) for _ in range(numel)], dtype=dtype).reshape(shape)
    if dtype is torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype is torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, generator=gen)
    high = INTEGERS[dtype]
    return torch.randint(-high, high, shape, dtype=dtype, generator=gen)


class TestTensorText:
    @pytest.mark.parametrize("seed", range(4))
    def test_equals_str_on_random_tensors(self, seed):
        rng = random.Random(seed)
        for _ in range(200):
            value = _random_tensor(rng)
            assert tensor_text(value) == str(value), (value.dtype, tuple(value.shape))

    @pytest.mark.parametrize(
        "options",
        [{"precision": 2}, {"sci_mode": True}, {"sci_mode": False}, {"linewidth": 30}],
    )
    def test_follows_the_print_options(self, options):
        rng = random.Random(7)
        try:
            torch.set_printoptions(**options)
            for _ in range(100):
                value = _random_tensor(rng)
                assert tensor_text(value) == str(value), (options, value.dtype)
        finally:
            torch.set_printoptions(profile="default")

    @pytest.mark.parametrize(
        "value",
        [
            torch.ones(3, requires_grad=True),
            torch.ones(3, requires_grad=True) * 2,  # a grad_fn
            torch.zeros(0),
            torch.zeros(2, 0),
            torch.arange(2000.0),  # summarised
            torch.ones(2, dtype=torch.float16),
            torch.ones(2, dtype=torch.complex64),
            torch.nn.Parameter(torch.ones(2)),
            torch.ones(4).to_sparse(),
        ],
    )
    def test_other_tensors_take_str(self, value):
        assert tensor_text(value) == str(value)
