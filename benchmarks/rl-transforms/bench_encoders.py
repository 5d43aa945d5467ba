"""R3MTransform forward on a batch of 32 224x224 frames (frames/s): ours vs the bare encoder.

Question: what does the transform add to the network itself? ``rl_stack`` runs
``R3MTransform(model, size=224)`` on a tensordict of 32 uint8 frames
``[32, 224, 224, 3]`` (channels moved first, scaled to [0, 1], ImageNet-normalised,
embedded, the frames removed). ``floor`` calls the same encoder module directly on
the already normalised float batch ``[32, 3, 224, 224]`` (the exact tensor the
transform feeds it, built once outside the timing). ``torchrl`` runs its
``R3MTransform`` (it needs torchvision; without it the row says why). Weights are
random (no download). ``BENCH_R3M_MODEL`` picks the ResNet (default ``resnet18``).
With ``--device cuda`` the frames and the encoder live on the GPU and each call waits
for the GPU to finish (the time of the work, not of its launch).
"""

from __future__ import annotations

import importlib
import os

import torch
from tensordict import TensorDict

from _harness import Context, Workload, run

FRAMES = 32
MODEL = os.environ.get("BENCH_R3M_MODEL", "resnet18")


def _frames() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (FRAMES, 224, 224, 3), dtype=torch.uint8, generator=gen)


def _finish(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def transform_setup(ctx: Context):
    r3m = ctx.lib.envs.R3MTransform(MODEL, in_keys=["pixels"], size=224).to(ctx.device)
    data = TensorDict(pixels=_frames(), batch_size=[FRAMES]).to(ctx.device)

    def forward():
        with torch.no_grad():
            out = r3m(data.clone(False))
        _finish(ctx.device)
        return out

    return forward


def encoder_setup(ctx: Context):
    envs = importlib.import_module("rl_stack.envs")
    r3m = envs.R3MTransform(MODEL, in_keys=["pixels"], size=224).to(ctx.device)
    network = r3m.network
    # the network input the transform builds (channels first, normalised), made once here
    images = r3m.preprocess(_frames().to(ctx.device))

    def forward():
        with torch.no_grad():
            out = network(images)
        _finish(ctx.device)
        return out

    return forward


WORKLOADS = [
    Workload(
        f"R3MTransform({MODEL}) forward [{FRAMES}, 224, 224, 3]",
        setups={"rl_stack": transform_setup, "torchrl": transform_setup, "floor": encoder_setup},
        items=FRAMES,
        unit="frames",
        devices=("cpu", "cuda"),
    )
]

if __name__ == "__main__":
    run(WORKLOADS)
