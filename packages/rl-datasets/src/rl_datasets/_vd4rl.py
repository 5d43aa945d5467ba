"""V-D4RL: the pixel datasets of ``conglu/vd4rl`` on the Hugging Face hub (``.npz`` files)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._episodes import EpisodeSource, write_episodes
from rl_datasets._hub import hub_files, hub_url
from rl_datasets._ids import check_dataset_id

__all__ = ["VD4RLExperienceReplay"]

HUB_REPO = "conglu/vd4rl"
PREFIX = "vd4rl"
_KNOWN = [
    *(f"distracting/walker_walk_random/64px/{level}" for level in ("easy", "hard", "medium")),
    *(
        f"main/{task}/{kind}/64px"
        for task in ("cheetah_run", "humanoid_walk", "walker_walk")
        for kind in ("expert", "medium", "medium_expert", "medium_replay", "random")
    ),
    "multitask/cheetah_run_random/64px",
    "multitask/walker_walk_random/64px",
]
_PIXELS = ("image", "observation")
_FLAGS = ("is_first", "is_last", "is_terminal", "reward", "action", "discount")


class VD4RLExperienceReplay(BaseDatasetExperienceReplay):
    """V-D4RL experience replay dataset.

    The ``.npz`` files of ``vd4rl/<dataset_id>`` in the hub dataset ``conglu/vd4rl`` are
    downloaded with ``huggingface_hub`` and converted once into TED memory-mapped
    tensors.  Each file holds consecutive steps with ``image`` (or ``observation``),
    ``action``, ``reward``, ``discount``, ``is_first``, ``is_last`` and
    ``is_terminal``: they become ``pixels`` and ``("next", "pixels")`` (the following
    frame; zeros after a step that ends an episode), ``action``, ``discount``,
    ``is_init``, ``("next", "reward")``, ``("next", "done")`` (``is_last``),
    ``("next", "terminated")`` (``is_terminal``) and ``("next", "truncated")``
    (``is_last`` without ``is_terminal``); any other array goes under ``"state"``.

    Args:
        dataset_id (str): one of :attr:`available_datasets`.
        batch_size (int): the batch size of :meth:`sample`.

    Keyword Args:
        root (Path or str, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/vd4rl`` or ``~/.cache/rl_stack/datasets/vd4rl``.
        download (bool or str, optional): download and convert if needed; ``"force"``
            converts again. Defaults to ``True``.
        sampler (Sampler, optional): Defaults to ``RandomSampler()``.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None``.
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): Defaults to ``None``.
        transform (Transform, optional): applied to samples (after the image conversion).
            Defaults to ``None``.
        split_trajs (bool, optional): store padded trajectories. Defaults to ``False``.
        totensor (bool, optional): sampled ``pixels`` become float ``[C, H, W]`` images in
            ``[0, 1]``. Defaults to ``True``.
        image_size (int or list of int, optional): resize sampled images (bilinear).
            Defaults to ``None``.
        num_workers (int, optional): accepted for API compatibility. Defaults to ``0``.
        **env_kwargs: accepted for API compatibility, unused.

    Raises:
        ValueError: for an unknown ``dataset_id`` (close ids are suggested).
        ImportError: without huggingface_hub (``pip install 'rl-datasets[hub]'``).

    Examples:
        >>> data = VD4RLExperienceReplay("main/walker_walk/expert/64px", batch_size=8)  # doctest: +SKIP
        >>> data.sample()["pixels"].shape  # doctest: +SKIP
        torch.Size([8, 3, 64, 64])
    """

    _source = "vd4rl"
    available_datasets: ClassVar[list[str]] = _KNOWN

    def __init__(
        self,
        dataset_id: str,
        batch_size: int,
        *,
        root: str | Path | None = None,
        download: bool | str = True,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable | None = None,
        split_trajs: bool = False,
        totensor: bool = True,
        image_size: int | list[int] | None = None,
        num_workers: int = 0,
        **env_kwargs: Any,  # Any: accepted for API compatibility
    ) -> None:
        check_dataset_id(type(self).__name__, dataset_id, self.available_datasets)
        self._open(
            dataset_id,
            root=root,
            download=download,
            split_trajs=split_trajs,
            writer=writer,
            batch_size=batch_size,
            sampler=sampler,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            prefetch=prefetch,
        )
        if totensor or image_size is not None:
            self.append_transform(_PixelsToTensor(totensor=totensor, image_size=image_size))
        if transform is not None:
            self.append_transform(transform)

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        prefix = f"{PREFIX}/{self.dataset_id}"
        files = hub_files(HUB_REPO, prefix, downloads, owner=owner, suffixes=(".npz",))
        episodes = [_npz_block(file, owner) for file in files]
        data = write_episodes(dest, episodes, owner=owner)
        return data, {"source": [hub_url(HUB_REPO, prefix)], "files": [f.name for f in files]}


def _npz_block(file: Path, owner: str) -> EpisodeSource:
    try:
        with np.load(file, allow_pickle=False) as npz:
            steps = npz["action"].shape[0]
    except (OSError, ValueError, KeyError) as err:
        file.unlink()
        raise ValueError(
            f"{owner}: {file.name} is not a V-D4RL .npz file with an 'action' array ({err}). "
            "It was removed; retry the download."
        ) from err

    def load() -> dict[Any, np.ndarray]:
        with np.load(file, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        pixels = next(arrays.pop(name) for name in _PIXELS if name in arrays)
        last = arrays["is_last"].astype(bool).reshape(steps, 1)
        terminal = arrays["is_terminal"].astype(bool).reshape(steps, 1)
        after = np.zeros_like(pixels)
        after[:-1] = pixels[1:]
        after[last[:, 0]] = 0  # the next frame belongs to another episode
        out: dict[Any, np.ndarray] = {
            ("pixels",): pixels,
            ("next", "pixels"): after,
            ("action",): arrays["action"],
            ("is_init",): arrays["is_first"].astype(bool).reshape(steps, 1),
            ("next", "reward"): arrays["reward"].reshape(steps, 1),
            ("next", "done"): last,
            ("next", "terminated"): terminal,
            ("next", "truncated"): last & ~terminal,
            ("done",): np.zeros_like(last),
            ("terminated",): np.zeros_like(last),
            ("truncated",): np.zeros_like(last),
        }
        if "discount" in arrays:
            out[("discount",)] = arrays["discount"].reshape(steps, -1)
        for name, value in arrays.items():
            if name not in _FLAGS and value.dtype.kind in "biuf":
                out[("state", name)] = value
        return out

    return EpisodeSource(steps, load, file.name)


class _PixelsToTensor:
    """Sampled ``uint8 [..., H, W, C]`` pixels -> float ``[..., C, H, W]`` in [0, 1], resized."""

    def __init__(self, *, totensor: bool, image_size: int | list[int] | None) -> None:
        self.totensor = totensor
        self.size = [image_size] * 2 if isinstance(image_size, int) else image_size

    def __call__(self, data: TensorDictBase) -> TensorDictBase:
        for key in ("pixels", ("next", "pixels")):
            value = data.get(key, None)
            if value is None:
                continue
            if self.totensor:
                value = value.movedim(-1, -3).float() / 255
            if self.size is not None:
                lead = value.shape[:-3]
                flat = value.reshape(-1, *value.shape[-3:]).float()
                flat = torch.nn.functional.interpolate(flat, size=list(self.size), mode="bilinear")
                value = flat.reshape(*lead, *flat.shape[1:])
            data.set(key, value)
        return data
