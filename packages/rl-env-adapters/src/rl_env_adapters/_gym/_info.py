"""Reading gym ``info`` dicts into the output tensordict, with specs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rl_env_adapters._gym._spaces import numpy_to_torch_dtype
from rl_specs import Composite, Unbounded

__all__ = ["InfoDictReader"]


class InfoDictReader:
    """Copy chosen entries of gym's ``info`` dict into the step / reset output.

    Args:
        keys (sequence of str): the info entries to read.
        spec (Composite, optional): their specs (batched like the env). Defaults to
            ``Unbounded`` float32 leaves of shape ``batch_size``.

    Keyword Args:
        batch_size (torch.Size, optional): the env batch size. Defaults to ``()``.

    Raises:
        KeyError: at read time, if an entry listed in ``keys`` is missing from the info.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> reader = InfoDictReader(["lives"])
        >>> reader({"lives": 3}, TensorDict())["lives"]
        tensor(3.)
    """

    def __init__(
        self,
        keys: Sequence[str],
        spec: Composite | None = None,
        *,
        batch_size: torch.Size | Sequence[int] = (),
    ) -> None:
        self.keys = list(keys)
        batch_size = torch.Size(batch_size)
        if spec is None:
            spec = Composite(
                {key: Unbounded(shape=batch_size, dtype=torch.float32) for key in self.keys},
                shape=batch_size,
            )
        self.info_spec = spec
        self._dtypes = {key: spec[key].dtype for key in self.keys}
        self._shapes = {key: spec[key].shape for key in self.keys}

    @classmethod
    def from_info(
        cls,
        info: Mapping[str, Any],
        *,
        batch_size: torch.Size | Sequence[int] = (),
        ignore_private: bool = True,
    ) -> InfoDictReader:
        """Build a reader for every numeric entry of ``info`` (as returned by a reset)."""
        batch_size = torch.Size(batch_size)
        specs = {}
        for key, value in info.items():
            if ignore_private and key.startswith("_"):
                continue
            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                continue
            shape = array.shape if batch_size else (*batch_size, *array.shape)
            specs[key] = Unbounded(shape=shape, dtype=numpy_to_torch_dtype(array.dtype))
        return cls(list(specs), Composite(specs, shape=batch_size), batch_size=batch_size)

    def __call__(self, info: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.keys:
            if key not in info:
                raise KeyError(
                    f"The info dict has no entry {key!r} that the info reader expects. "
                    f"Available entries: {sorted(info)}."
                )
            value = torch.as_tensor(np.asarray(info[key]), dtype=self._dtypes[key])
            tensordict.set(key, value.reshape(self._shapes[key]))
        return tensordict
