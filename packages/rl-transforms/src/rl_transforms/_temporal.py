"""Transforms over successive frames: :class:`CatFrames` and :class:`TimeMaxPool`.

In an environment the stack lives in the data itself: a step concatenates the
previous stack (read from the step input, minus its oldest frame) with the new
frame, so partial resets and cloned transforms need no hidden state. On stored
trajectories (``forward``), the stacks are rebuilt along the time dimension with
padding at each episode start. :class:`TimeMaxPool` keeps its last ``T`` frames in
registered buffers (shared by clones).
"""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Bounded, Composite, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg

_PADDINGS = ("same", "constant")


def _repeat_frames(frame: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    return torch.cat([frame] * n, dim)


class CatFrames(Transform):
    """Concatenates successive observation frames into a single tensor.

    Args:
        N (int): the number of frames stacked.
        dim (int): the (negative) dim along which frames are concatenated.
        in_keys (sequence of NestedKey, optional): the frames. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): the stacks. Defaults to ``in_keys``.
        padding (str, optional): ``"same"`` repeats the first frame of an episode,
            ``"constant"`` uses ``padding_value``. Defaults to ``"same"``.
        padding_value (float, optional): the constant padding. Defaults to ``0``.
        as_inverse (bool, optional): accepted for compatibility; must be ``False``.
            Defaults to ``False``.
        reset_key (NestedKey, optional): the reset entry. Defaults to ``"_reset"``.
        done_key (NestedKey, optional): the done entry marking episode ends in stored
            trajectories. Defaults to ``"done"``.

    Raises:
        ValueError: if ``N < 1``, ``dim >= 0``, ``padding`` is unknown or ``as_inverse``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CatFrames(N=2, dim=-1, in_keys=["obs"])
        >>> traj = TensorDict({"obs": torch.arange(4.0).reshape(4, 1),
        ...                    ("next", "done"): torch.tensor([[False], [True], [False], [False]])}, [4])
        >>> t(traj)["obs"]
        tensor([[0., 0.],
                [0., 1.],
                [2., 2.],
                [2., 3.]])
    """

    def __init__(
        self,
        N: int,
        dim: int,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        padding: str = "same",
        padding_value: float = 0,
        as_inverse: bool = False,
        reset_key: NestedKey | None = None,
        done_key: NestedKey | None = None,
    ) -> None:
        if not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames expected N to be an int >= 1, got N={N!r}. Pass e.g. N=4.")
        if dim >= 0:
            raise ValueError(
                f"CatFrames expected a negative dim (counted from the end, so batch dims do "
                f"not shift it), got dim={dim}. Pass e.g. dim=-3 for channels-first images."
            )
        if padding not in _PADDINGS:
            raise ValueError(f"CatFrames expected padding in {_PADDINGS}, got {padding!r}.")
        if as_inverse:
            raise ValueError(
                "CatFrames(as_inverse=True) is not supported: stack frames on the forward path."
            )
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.N = N
        self.dim = dim
        self.padding = padding
        self.padding_value = padding_value
        self.as_inverse = as_inverse
        self.reset_key = reset_key if reset_key is not None else "_reset"
        self.done_key = done_key if done_key is not None else "done"

    # ------------------------------------------------------------------ env use
    def _initial(self, frame: torch.Tensor) -> torch.Tensor:
        if self.padding == "same":
            return _repeat_frames(frame, self.N, self.dim)
        pad = torch.full_like(frame, self.padding_value)
        return torch.cat([*[pad] * (self.N - 1), frame], self.dim)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            frame = tensordict_reset.get(in_key, None)
            if frame is not None:
                tensordict_reset.set(out_key, self._initial(frame))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        dim = self.dim
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            frame = read(next_tensordict, in_key)
            if frame is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"CatFrames expected the frame {in_key!r} in the step output, got "
                    f"{sorted(map(str, next_tensordict.keys(True, True)))}. Fix in_keys."
                )
            stack = read(tensordict, out_key)
            if stack is None:
                raise KeyError(
                    f"CatFrames expected the previous stack {out_key!r} in the step input; it "
                    f"is written at reset. Reset the env first and keep {out_key!r} in the data."
                )
            size = frame.shape[dim]
            write(
                next_tensordict,
                out_key,
                torch.cat([stack.narrow(dim, size, size * (self.N - 1)), frame], dim),
            )
        return next_tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec = super().transform_output_spec(output_spec)
        self._carry_as_state(output_spec["full_observation_spec"], self._out_keys)
        return output_spec

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Bounded):
            return Bounded(
                low=_repeat_frames(spec.low, self.N, self.dim),
                high=_repeat_frames(spec.high, self.N, self.dim),
                shape=None,
                dtype=spec.dtype,
                device=spec.device,
            )
        shape = list(spec.shape)
        shape[self.dim] *= self.N
        return Unbounded(shape=shape, dtype=spec.dtype, device=spec.device)

    # ------------------------------------------------------------------ stored trajectories
    def _episode_starts(self, tensordict: TensorDictBase) -> torch.Tensor:
        """For each time step, the index of its episode's first step (time = last batch dim)."""
        steps = tensordict.batch_size[-1]
        done = tensordict.get(("next", self.done_key), None)
        if done is None:
            done = tensordict.get(self.done_key, None)
        index = torch.arange(steps, device=tensordict.device).expand(tensordict.batch_size)
        if done is None:
            return torch.zeros_like(index)
        done = done.reshape(*tensordict.batch_size, -1).any(-1)
        begins = torch.zeros_like(done)
        begins[..., 1:] = done[..., :-1]
        begins[..., 0] = True
        return torch.where(begins, index, torch.zeros_like(index)).cummax(-1).values

    def _stack_trajectory(
        self, frames: torch.Tensor, starts: torch.Tensor, batch_dims: int
    ) -> torch.Tensor:
        steps = frames.shape[batch_dims - 1]
        time = torch.arange(steps, device=frames.device)
        feature_dims = frames.ndim - batch_dims
        out = []
        for lag in range(self.N - 1, -1, -1):
            source = time - lag
            before = source < starts
            index = torch.where(before, starts, source.expand_as(starts))
            gathered = torch.gather(
                frames,
                batch_dims - 1,
                index.reshape(*index.shape, *(1,) * feature_dims).expand_as(frames),
            )
            if self.padding == "constant":
                mask = before.reshape(*before.shape, *(1,) * feature_dims)
                gathered = torch.where(
                    mask, torch.full_like(gathered, self.padding_value), gathered
                )
            out.append(gathered)
        return torch.cat(out, self.dim)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not tensordict.batch_dims:
            raise ValueError(
                "CatFrames.forward expects trajectories with time as the last batch dim, got a "
                "tensordict without batch dims. Pass data shaped [..., T]."
            )
        starts = self._episode_starts(tensordict)
        batch_dims = tensordict.batch_dims
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            frames = tensordict.get(in_key, None)
            if frames is None:
                raise KeyError(
                    f"CatFrames expected {in_key!r} in the stored data, got "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Fix in_keys."
                )
            stacked = self._stack_trajectory(frames, starts, batch_dims)
            tensordict.set(out_key, stacked)
            next_frames = tensordict.get(("next", in_key), None)
            if next_frames is not None:
                size = frames.shape[self.dim]
                tensordict.set(
                    ("next", out_key),
                    torch.cat(
                        [stacked.narrow(self.dim, size, size * (self.N - 1)), next_frames], self.dim
                    ),
                )
        return tensordict

    def __repr__(self) -> str:
        return f"CatFrames(N={self.N}, dim={self.dim}, in_keys={self.in_keys}, out_keys={self.out_keys})"


class TimeMaxPool(Transform):
    """Take the maximum value in each position over the last T observations.

    Args:
        in_keys (sequence of NestedKey, optional): the observations. Defaults to ``["observation"]``.
        out_keys (sequence of NestedKey, optional): the pooled entries. Defaults to ``in_keys``.
        T (int, optional): the window length. Defaults to ``1``.
        reset_key (NestedKey, optional): the reset entry. Defaults to ``"_reset"``.

    Raises:
        ValueError: if ``T < 1``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = TimeMaxPool(in_keys=["obs"], T=2)
        >>> _ = t._reset(TensorDict(), TensorDict({"obs": torch.tensor([3.0])}))
        >>> [t._step(TensorDict(), TensorDict({"obs": torch.tensor([v])}))["obs"].item() for v in (1.0, 0.0)]
        [3.0, 1.0]
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        T: int = 1,
        reset_key: NestedKey | None = None,
    ) -> None:
        if not isinstance(T, int) or T < 1:
            raise ValueError(f"TimeMaxPool expected T to be an int >= 1, got T={T!r}.")
        super().__init__(in_keys if in_keys is not None else ["observation"], out_keys)
        self.T = T
        self.reset_key = reset_key if reset_key is not None else "_reset"
        for i in range(len(self._in_keys)):
            self.register_buffer(f"_window_{i}", None)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = tensordict.get(self.reset_key, None)
        for i, (in_key, out_key) in enumerate(zip(self._in_keys, self._out_keys)):
            frame = tensordict_reset.get(in_key, None)
            if frame is None:
                continue
            fresh = frame.unsqueeze(0).expand(self.T, *frame.shape).clone()
            window = getattr(self, f"_window_{i}")
            if mask is not None and window is not None and window.shape == fresh.shape:
                keep = mask.reshape(*mask.shape, *(1,) * (frame.ndim - mask.ndim))
                fresh = torch.where(keep, fresh, window)
            setattr(self, f"_window_{i}", fresh)
            tensordict_reset.set(out_key, fresh.max(0).values)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for i, (in_key, out_key) in enumerate(zip(self._in_keys, self._out_keys)):
            frame = next_tensordict.get(in_key, None)
            if frame is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"TimeMaxPool expected {in_key!r} in the data, got "
                    f"{sorted(map(str, next_tensordict.keys(True, True)))}. Fix in_keys."
                )
            window = getattr(self, f"_window_{i}")
            if window is None or window.shape[1:] != frame.shape:
                window = frame.unsqueeze(0).expand(self.T, *frame.shape)
            window = torch.cat([window[1:], frame.unsqueeze(0)], 0)
            setattr(self, f"_window_{i}", window)
            next_tensordict.set(out_key, window.max(0).values)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "TimeMaxPool pools successive frames of an environment and cannot be applied to "
            "stored data. Use it in a TransformedEnv."
        )
