"""OpenML: classification tables fetched with scikit-learn, as contextual-bandit data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_datasets._backends import EXTRA_OPENML, require
from rl_datasets._base import BaseDatasetExperienceReplay
from rl_datasets._ids import check_dataset_id
from rl_datasets._ted import allocate
from rl_replay import SamplerWithoutReplacement

__all__ = ["OpenMLExperienceReplay"]

# dataset name -> (OpenML name, version)
_TABLES = {
    "adult_num": ("adult", 1),
    "adult_onehot": ("adult", 1),
    "mushroom_num": ("mushroom", 1),
    "mushroom_onehot": ("mushroom", 1),
    "covertype": ("covertype", 3),
    "shuttle": ("shuttle", 1),
    "magic": ("MagicTelescope", 1),
}


class OpenMLExperienceReplay(BaseDatasetExperienceReplay):
    """An experience replay for OpenML data.

    The table is fetched with scikit-learn's ``fetch_openml`` (cached under the dataset's
    download folder) and converted once into memory-mapped tensors: ``"X"`` holds the
    standardised features (or, for the ``*_onehot`` variants, the standardised numeric
    features followed by one-hot categorical ones) and ``"y"`` the label-encoded class,
    the context and the best arm of a contextual bandit.  For ``adult_*`` the class is
    the ``occupation`` column (rows with missing values are dropped).  Needs
    scikit-learn and pandas (``pip install 'rl-datasets[openml]'``).

    Args:
        name (str): ``"adult_num"``, ``"adult_onehot"``, ``"mushroom_num"``,
            ``"mushroom_onehot"``, ``"covertype"``, ``"shuttle"`` or ``"magic"``.
        batch_size (int): the batch size of :meth:`sample`.
        root (Path, optional): the folder of the converted datasets. Defaults to
            ``$RL_DATASETS_ROOT/openml`` or ``~/.cache/rl_stack/datasets/openml``.
        sampler (Sampler, optional): Defaults to :class:`~rl_replay.SamplerWithoutReplacement`.
        writer (Writer, optional): Defaults to :class:`~rl_replay.ImmutableDatasetWriter`.
        collate_fn (callable, optional): Defaults to ``None``.
        pin_memory (bool, optional): Defaults to ``False``.
        prefetch (int, optional): Defaults to ``None``.
        transform (Transform, optional): applied to samples. Defaults to ``None``.

    Raises:
        ValueError: for an unknown ``name`` (close names are suggested).
        ImportError: without scikit-learn or pandas.

    Examples:
        >>> data = OpenMLExperienceReplay("shuttle", batch_size=16)  # doctest: +SKIP
        >>> data.sample()["X"].shape  # doctest: +SKIP
        torch.Size([16, 9])
    """

    _source = "openml"
    available_datasets: ClassVar[list[str]] = list(_TABLES)

    def __init__(
        self,
        name: str,
        batch_size: int,
        root: Path | None = None,
        sampler: Any = None,  # Any: a Sampler
        writer: Any = None,  # Any: a Writer
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Callable | None = None,
    ) -> None:
        check_dataset_id(type(self).__name__, name, _TABLES)
        self._open(
            name,
            root=root,
            download=True,
            writer=writer,
            batch_size=batch_size,
            sampler=sampler if sampler is not None else SamplerWithoutReplacement(),
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            prefetch=prefetch,
            transform=transform,
        )
        self.max_outcome_val = int(self[:]["y"].max())

    def _convert(self, downloads: Path, dest: Path) -> tuple[TensorDictBase, dict[str, Any]]:
        owner = type(self).__name__
        require("pandas", extra=EXTRA_OPENML, owner=owner)
        datasets = require("sklearn.datasets", extra=EXTRA_OPENML, owner=owner)
        table, version = _TABLES[self.dataset_id]
        try:
            features, target = datasets.fetch_openml(
                table, version=version, return_X_y=True, as_frame=True, data_home=str(downloads)
            )
        except OSError as err:  # urllib's network errors are OSErrors
            raise ConnectionError(
                f"{owner} could not fetch the OpenML table {table!r} (version {version}) "
                f"({err}). Check the network, then retry."
            ) from err
        x, y = _encode(self.dataset_id, features, target, owner)
        out = allocate(
            dest, {"X": ((x.shape[1],), torch.float32), "y": ((), torch.int64)}, x.shape[0]
        )
        out.get("X").numpy()[:] = x
        out.get("y").numpy()[:] = y
        return out, {"source": [f"https://www.openml.org/search?type=data&name={table}"]}


def _encode(name: str, features: Any, target: Any, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Standardised (and one-hot) features and label-encoded classes of an OpenML table."""
    preprocessing = require("sklearn.preprocessing", extra=EXTRA_OPENML, owner=owner)
    scale = preprocessing.StandardScaler().fit_transform
    if name.startswith("adult"):
        features = features[~features.isna().any(axis=1)]
        target = features["occupation"]
        features = features.drop(columns=["occupation"])
    categorical = [c for c in features.columns if not _is_numeric(features[c])]
    numeric = [c for c in features.columns if c not in categorical]
    codes = features.copy()
    for column in categorical:
        codes[column] = preprocessing.LabelEncoder().fit_transform(features[column].astype(str))
    y = preprocessing.LabelEncoder().fit_transform(np.asarray(target).astype(str))
    if name.endswith("_onehot"):
        parts = []
        if numeric:
            parts.append(scale(codes[numeric].to_numpy(dtype=np.float64)))
        if categorical:
            encoder = preprocessing.OneHotEncoder(sparse_output=False)
            parts.append(encoder.fit_transform(codes[categorical]))
        x = np.concatenate(parts, axis=1)
    else:
        x = scale(codes.to_numpy(dtype=np.float64))
    return x.astype(np.float32), y.astype(np.int64)


def _is_numeric(column: Any) -> bool:
    return column.dtype.kind in "biuf"
