"""Transforms over successive frames: :class:`CatFrames` and :class:`TimeMaxPool`.

In an environment the stack lives in the data itself: a step concatenates the
previous stack (read from the step input, minus its oldest frame) with the new
frame, so partial resets and cloned transforms need no hidden state. On stored
trajectories (``forward``), the stacks are rebuilt along the time dimension with
padding at each episode start. :class:`TimeMaxPool` keeps its last ``T`` frames in
registered buffers (shared by clones).
"""

from __future__ import annotations

import warnings

import torch
from tensordict import NestedKey, TensorDictBase

from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Bounded, Composite, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg, as_tuple

_PADDINGS = ("same", "constant")


def _repeat_frames(frame: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    return torch.cat([frame] * n, dim)


class CatFrames(Transform):
    """Concatenates successive observation frames into a single tensor.

    In an environment, each step appends the new frame to the previous stack (read
    from the step input), with padding right after a reset. On stored trajectories
    (``forward``, or the inverse path when ``as_inverse=True``) the stacks are rebuilt
    along the time dim (the batch dim named ``"time"``, else the last one), each
    window cut at the episode boundaries read from ``("next", done_key)``.

    Args:
        N (int): the number of frames stacked.
        dim (int): the (negative) dim along which frames are concatenated.
        in_keys (sequence of NestedKey, optional): the frames. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): the stacks. Defaults to ``in_keys``.
        padding (str, optional): ``"same"`` repeats the episode's first frame (its last
            one for future windows), ``"constant"`` uses ``padding_value``.
            Defaults to ``"same"``.
        padding_value (float, optional): the constant padding. Defaults to ``0``.
        as_inverse (bool, optional): stack on the inverse path (when data is written to
            a replay buffer) instead of the forward one; offline use only.
            Defaults to ``False``.
        reset_key (NestedKey, optional): the reset entry. Defaults to ``"_reset"``.
        done_key (NestedKey, optional): the done entry marking episode ends in stored
            trajectories. Defaults to ``"done"``.
        future (bool, optional): offline only; each window holds the current frame
            and the ``N - 1`` following ones instead of the preceding ones. Without a
            done entry each trajectory row is one episode. Defaults to ``False``.
        mask_key (NestedKey, optional): offline only; where to write a boolean mask of
            shape ``[*batch, N]`` that is ``True`` for window slots filled by padding.
            Defaults to ``None`` (no mask).

    Raises:
        ValueError: if ``N < 1``, ``dim >= 0`` or ``padding`` is unknown.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CatFrames(N=2, dim=-1, in_keys=["obs"])
        >>> traj = TensorDict({"obs": torch.arange(4.0).reshape(4, 1),
        ...                    ("next", "done"): torch.tensor([[False], [True], [False], [False]])}, [4])
        >>> t(traj.refine_names("time"))["obs"]
        tensor([[0., 0.],
                [0., 1.],
                [2., 2.],
                [2., 3.]])
        >>> ahead = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["ahead"], future=True,
        ...                   mask_key="pad")
        >>> out = ahead(TensorDict({"obs": torch.arange(3.0).reshape(3, 1)}, [3]).refine_names("time"))
        >>> out["ahead"]
        tensor([[0., 1., 2.],
                [1., 2., 2.],
                [2., 2., 2.]])
        >>> out["pad"]
        tensor([[False, False, False],
                [False, False,  True],
                [False,  True,  True]])
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
        future: bool = False,
        mask_key: NestedKey | None = None,
    ) -> None:
        if not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames expected N to be an int >= 1, got N={N!r}. Pass e.g. N=4.")
        if dim >= 0:
            raise ValueError(
                f"CatFrames expected a negative dim (counted from the end, so batch dims do "
                f"not shift it), got dim={dim}; dim must be < 0 to accommodate for tensordict "
                f"batch dims. Pass e.g. dim=-3 for channels-first images."
            )
        if padding not in _PADDINGS:
            raise ValueError(f"CatFrames expected padding in {_PADDINGS}, got {padding!r}.")
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.N = N
        self.dim = dim
        self.padding = padding
        self.padding_value = padding_value
        self.as_inverse = bool(as_inverse)
        self.reset_key = reset_key if reset_key is not None else "_reset"
        self.done_key = done_key if done_key is not None else "done"
        self.future = bool(future)
        self.mask_key = mask_key

    # ------------------------------------------------------------------ env use
    def _check_online(self) -> None:
        offline = [
            name
            for name, on in (
                ("as_inverse=True", self.as_inverse),
                ("future=True", self.future),
                (f"mask_key={self.mask_key!r}", self.mask_key is not None),
            )
            if on
        ]
        if offline:
            raise RuntimeError(
                f"CatFrames({', '.join(offline)}) works offline only (replay buffers, stored "
                f"trajectories), not inside an env: CatFrames as inverse is not supported as a "
                f"transform for environments, only for replay buffers. Build the env's CatFrames "
                f"without {', '.join(offline)}."
            )

    def _initial(self, frame: torch.Tensor) -> torch.Tensor:
        if self.padding == "same":
            return _repeat_frames(frame, self.N, self.dim)
        pad = torch.full_like(frame, self.padding_value)
        return torch.cat([*[pad] * (self.N - 1), frame], self.dim)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._check_online()
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
        if self.as_inverse:
            return output_spec
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
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.as_inverse:
            return tensordict
        return self._unfold(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.as_inverse:
            return tensordict
        return self._unfold(tensordict)

    def _has_inverse(self) -> bool:
        return self.as_inverse

    def _time_dim(self, tensordict: TensorDictBase) -> int:
        try:
            names = list(tensordict.names)
        except (RuntimeError, ValueError):  # some lazy tensordicts carry no names
            names = []
        if "time" in names:
            return names.index("time")
        warnings.warn(
            f"CatFrames found no batch dim named 'time' in data of batch size "
            f"{tuple(tensordict.batch_size)}; it stacks along the last batch dim. Name the "
            f"time dim (td.refine_names(..., 'time')) to choose it.",
            UserWarning,
            stacklevel=3,
        )
        return tensordict.batch_dims - 1

    def _episode_ends(self, tensordict: TensorDictBase) -> torch.Tensor | None:
        """``[*batch]`` booleans, True at each step that ends an episode (None if unknown)."""
        done = tensordict.get(("next", self.done_key), None)
        if done is None:
            done = tensordict.get(self.done_key, None)
        if done is None:
            return None
        return done.reshape(*tensordict.batch_size, -1).any(-1)

    def _windows(self, ends: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Source time index and padding flag of every window slot: ``[*batch, T, N]`` each.

        ``ends`` has the time dim last; slots read oldest to newest.
        """
        steps = ends.shape[-1]
        time = torch.arange(steps, device=ends.device)
        if not self.future:
            begins = torch.zeros_like(ends)
            begins[..., 1:] = ends[..., :-1]
            begins[..., 0] = True
            bound = torch.where(begins, time, torch.zeros_like(time)).cummax(-1).values
            source = time.unsqueeze(-1) + torch.arange(1 - self.N, 1, device=ends.device)
            pad = source < bound.unsqueeze(-1)
        else:
            last = ends.clone()
            last[..., -1] = True
            filler = torch.full_like(time, steps - 1)
            bound = torch.where(last, time, filler).flip(-1).cummin(-1).values.flip(-1)
            source = time.unsqueeze(-1) + torch.arange(0, self.N, device=ends.device)
            pad = source > bound.unsqueeze(-1)
        return torch.where(pad, bound.unsqueeze(-1), source), pad

    def _stack(self, frames: torch.Tensor, index: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        batch_dims = index.ndim - 1
        feature = (1,) * (frames.ndim - batch_dims)
        out = []
        for slot in range(self.N):
            at = index[..., slot].reshape(*index.shape[:-1], *feature).expand_as(frames)
            gathered = torch.gather(frames, batch_dims - 1, at)
            if self.padding == "constant":
                fill = pad[..., slot].reshape(*pad.shape[:-1], *feature)
                gathered = gathered.masked_fill(fill, self.padding_value)
            out.append(gathered)
        return torch.cat(out, self.dim)

    def _unfold(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not tensordict.batch_dims:
            raise ValueError(
                "CatFrames cannot process unbatched tensordict: stored trajectories need a "
                "time dim. Pass data shaped [..., T] (e.g. a rollout)."
            )
        pairs = list(zip(self._in_keys, self._out_keys))
        roots = {as_tuple(k): out for k, out in pairs}
        if self.future and any(as_tuple(k)[0] == "next" for k in roots):
            raise NotImplementedError(
                f"CatFrames(future=True) got ('next', ...) in_keys {self.in_keys}: future "
                f"windows stack root entries only, ('next', ...) stacks are built for history "
                f"windows (future=False). Drop the 'next' keys."
            )
        time_dim = self._time_dim(tensordict)
        last = tensordict.batch_dims - 1
        ends = self._episode_ends(tensordict)
        if ends is None:
            if not self.future:
                raise KeyError(
                    f"CatFrames needs the done entry {('next', self.done_key)!r} to delimit "
                    f"episodes in stored trajectories; got "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Store the done flags "
                    f"(or set done_key)."
                )
            ends = torch.zeros(tensordict.batch_size, dtype=torch.bool, device=tensordict.device)
        index, pad = self._windows(ends.movedim(time_dim, last))
        for in_key, out_key in pairs:
            tup = as_tuple(in_key)
            if tup[0] == "next" and tup[1:] in roots:
                continue  # stacked from the root frames below
            frames = tensordict.get(in_key, None)
            if frames is None:
                raise KeyError(
                    f"CatFrames expected {in_key!r} in the stored data, got "
                    f"{sorted(map(str, tensordict.keys(True, True)))}. Fix in_keys."
                )
            stacked = self._stack(frames.movedim(time_dim, last), index, pad)
            tensordict.set(out_key, stacked.movedim(last, time_dim))
            next_frames = tensordict.get(("next", *tup), None)
            if self.future or next_frames is None:
                continue
            next_out = roots.get(("next", *tup), ("next", *as_tuple(out_key)))
            size = frames.shape[self.dim]
            shifted = stacked.narrow(self.dim, size, size * (self.N - 1))
            next_stacked = torch.cat([shifted, next_frames.movedim(time_dim, last)], self.dim)
            tensordict.set(next_out, next_stacked.movedim(last, time_dim))
        if self.mask_key is not None:
            tensordict.set(self.mask_key, pad.movedim(last, time_dim))
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
