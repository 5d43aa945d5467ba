"""Replay-buffer transforms: :class:`RandomCropTensorDict`."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_transforms._base import Transform


class RandomCropTensorDict(Transform):
    """A trajectory sub-sampler for ReplayBuffer and modules.

    Crops a random window of ``sub_seq_len`` consecutive steps along ``sample_dim``,
    independently for every other batch element.

    Args:
        sub_seq_len (int): the window length.
        sample_dim (int, optional): the (time) batch dim cropped. Defaults to ``-1``.
        mask_key (NestedKey, optional): a boolean entry marking the valid steps of padded
            trajectories (valid steps first); windows stay inside them. Defaults to ``None``.

    Raises:
        ValueError: if ``sub_seq_len < 1`` or a trajectory is shorter than the window.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = RandomCropTensorDict(3)
        >>> out = t(TensorDict({"step": torch.arange(10).expand(2, 10)}, [2, 10]))
        >>> out.batch_size, bool(((out["step"][:, 1:] - out["step"][:, :-1]) == 1).all())
        (torch.Size([2, 3]), True)
    """

    def __init__(
        self, sub_seq_len: int, sample_dim: int = -1, mask_key: NestedKey | None = None
    ) -> None:
        if sub_seq_len < 1:
            raise ValueError(f"RandomCropTensorDict expected sub_seq_len >= 1, got {sub_seq_len}.")
        super().__init__()
        self.sub_seq_len = sub_seq_len
        self.sample_dim = sample_dim
        self.mask_key = mask_key

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        dim = self.sample_dim % tensordict.batch_dims
        last = tensordict.batch_dims - 1
        data = tensordict.transpose(dim, last) if dim != last else tensordict
        lead, steps = data.batch_size[:-1], data.batch_size[-1]
        flat = data.reshape(-1, steps)
        if self.mask_key is not None:
            valid = flat.get(self.mask_key).reshape(flat.batch_size[0], steps, -1).any(-1).sum(-1)
        else:
            valid = torch.full((flat.batch_size[0],), steps, device=flat.device)
        if bool((valid < self.sub_seq_len).any()):
            raise ValueError(
                f"RandomCropTensorDict got a trajectory of {int(valid.min())} valid steps, shorter "
                f"than sub_seq_len={self.sub_seq_len}. Lower sub_seq_len or store longer trajectories."
            )
        starts = (
            torch.rand(valid.shape, device=valid.device) * (valid - self.sub_seq_len + 1)
        ).long()
        index = starts.unsqueeze(-1) + torch.arange(self.sub_seq_len, device=valid.device)
        rows = torch.arange(flat.batch_size[0], device=valid.device).unsqueeze(-1)
        out = flat[rows, index].reshape(*lead, self.sub_seq_len)
        return out.transpose(dim, last) if dim != last else out

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "RandomCropTensorDict crops stored trajectories: use it as a replay-buffer "
            "transform, not in an environment."
        )
