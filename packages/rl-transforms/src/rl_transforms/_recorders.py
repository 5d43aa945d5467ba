"""Recorders: transforms that keep what an env produces, for logging.

:class:`VideoRecorder` keeps image frames and hands them to a logger as a video,
:class:`TensorDictRecorder` keeps whole steps and saves them, and
:class:`PixelRenderTransform` writes the parent env's ``render()`` output into the
data so that envs without pixel observations can be recorded too.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import NestedKey, NonTensorData, TensorDict, TensorDictBase

from rl_envs_core.extension import get_entry as read
from rl_specs import Composite, NonTensor, Unbounded
from rl_transforms._base import ObservationTransform, Transform
from rl_transforms._image import CenterCrop
from rl_transforms._key_lists import KeyArg
from rl_transforms.loggers import Logger

_CHANNELS = (1, 3)


def _channels_first(owner: str, key: NestedKey, frames: torch.Tensor) -> torch.Tensor:
    """``[..., C, H, W]`` with 3 channels from a channels-first, channels-last or gray image."""
    if frames.ndim == 2:  # one gray [H, W] image
        frames = frames.unsqueeze(-3)
    elif frames.ndim >= 3 and frames.shape[-3] in _CHANNELS and frames.shape[-1] > 3:
        pass  # [..., C, H, W]
    elif frames.ndim >= 3 and frames.shape[-1] in _CHANNELS:
        frames = frames.movedim(-1, -3)  # [..., H, W, C]
    else:
        raise ValueError(
            f"VideoRecorder ({owner}) expected images at {key!r} as [..., C, H, W] or "
            f"[..., H, W, C] with C in {_CHANNELS} (or [H, W] gray), got shape "
            f"{tuple(frames.shape)}. Record an image entry (in_keys=['pixels']) or reshape it."
        )
    return frames.expand(*frames.shape[:-3], 3, *frames.shape[-2:])


def _to_uint8(frames: torch.Tensor) -> torch.Tensor:
    if frames.dtype == torch.uint8:
        return frames
    if frames.is_floating_point() and frames.numel() and float(frames.max()) <= 1.0:
        frames = frames * 255  # ToTensorImage output: [0, 1] floats
    return frames.round().clamp(0, 255).to(torch.uint8)


def make_video_grid(frames: torch.Tensor) -> torch.Tensor:
    """Tile ``[B, C, H, W]`` images into one ``[C, rows * H, cols * W]`` image (row-major).

    Examples:
        >>> make_video_grid(torch.ones(5, 3, 2, 2, dtype=torch.uint8)).shape
        torch.Size([3, 4, 6])
    """
    count, channels, height, width = frames.shape
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    padded = frames.new_zeros(rows * cols, channels, height, width)
    padded[:count] = frames
    grid = padded.reshape(rows, cols, channels, height, width).permute(2, 0, 3, 1, 4)
    return grid.reshape(channels, rows * height, cols * width)


class VideoRecorder(ObservationTransform):
    """Video Recorder transform.

    Keeps one frame of ``in_keys`` every ``skip`` steps (resets included) and,
    on :meth:`dump`, hands them to ``logger.log_video`` as one
    ``[1, T, 3, H, W]`` uint8 video. Frames may be channels-first or
    channels-last, uint8 or float in ``[0, 1]``, with or without batch dims; a
    batch becomes one grid image per step (``make_grid=True``) or consecutive
    frames. During the rollout a frame is only kept: the env's tensor itself (as
    a rollout keeps it), or a copy where the env writes its frames into memory
    the recorder already holds (the first frame of each video is copied to find
    such envs); the layout work happens once, at :meth:`dump`. The frames stay
    in memory until :meth:`dump` is called.

    Args:
        logger (Logger): where the video goes (``None``: frames are kept and dropped
            at :meth:`dump`).
        tag (str): the video's name in the logger.
        in_keys (sequence of NestedKey, optional): the image entry. Defaults to ``["pixels"]``.
        skip (int, optional): keep one frame every ``skip`` calls. Defaults to ``2`` in an
            unbatched env and ``1`` otherwise.
        center_crop (int, optional): crop a centred square of this size. Defaults to ``None``.
        make_grid (bool, optional): tile a batch of images into one frame. Defaults to
            ``True`` in an env and ``False`` on stored data.
        out_keys (sequence of NestedKey, optional): kept for API compatibility; the
            data passes through unchanged. Defaults to ``in_keys``.
        fps (int, optional): frames per second, passed to the logger. Defaults to the logger's.
        **kwargs: more keyword arguments for ``logger.log_video``.

    Raises:
        ValueError: if ``skip`` or ``center_crop`` is not a positive int, or (when
            recording) an image entry has no image layout.

    Examples:
        >>> import tempfile, torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> from rl_transforms.loggers import CSVLogger
        >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
        >>> recorder = VideoRecorder(logger, tag="frames", in_keys=["observation"], skip=1)
        >>> frames = torch.zeros(4, 3, 8, 8, dtype=torch.uint8)
        >>> recorder(TensorDict({"observation": frames}, [4])).batch_size  # stored data
        torch.Size([4])
        >>> recorder.dump()
        >>> torch.load(logger.experiment.log_dir + "/videos/frames_0.pt").shape
        torch.Size([1, 4, 3, 8, 8])
    """

    def __init__(
        self,
        logger: Logger | None,
        tag: str | None,
        in_keys: KeyArg = None,
        skip: int | None = None,
        center_crop: int | None = None,
        make_grid: bool | None = None,
        out_keys: KeyArg = None,
        fps: int | None = None,
        **kwargs: Any,  # Any: logger.log_video options
    ) -> None:
        for name, value in (("skip", skip), ("center_crop", center_crop)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"VideoRecorder expected {name} >= 1 (an int), got {value!r}.")
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.logger = logger
        self.tag = tag
        self.center_crop = center_crop
        self.video_kwargs = {**kwargs, **({"fps": fps} if fps is not None else {})}
        self._skip = skip
        self._make_grid = make_grid
        self.iter = 0
        self.count = 0
        self.obs: list[torch.Tensor] = []
        self.__dict__["_held"] = {}  # address -> (tensor, version) of the frames held
        self.__dict__["_copying"] = False

    @property
    def skip(self) -> int:
        """Keep one frame every ``skip`` calls."""
        if self._skip is not None:
            return self._skip
        parent = self.parent
        return 2 if parent is not None and not parent.batch_size else 1

    @skip.setter
    def skip(self, value: int) -> None:
        self._skip = value

    @property
    def make_grid(self) -> bool:
        """Whether a batch of images becomes one grid frame."""
        return self._make_grid if self._make_grid is not None else self.container is not None

    @make_grid.setter
    def make_grid(self, value: bool) -> None:
        self._make_grid = value

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        count = self.__dict__["count"] = self.__dict__["count"] + 1  # no nn.Module setattr
        if count % self.skip:
            return next_tensordict
        for key in self.in_keys:
            frame = read(next_tensordict, key)
            if type(frame) is not torch.Tensor:
                if isinstance(frame, NonTensorData):
                    frame = frame.data
                if frame is None:
                    continue
                frame = torch.as_tensor(frame)
            self._keep(frame)
        return next_tensordict

    def _keep(self, frame: torch.Tensor) -> None:
        """Append ``frame`` to :attr:`obs`: a reference, or a copy where one is needed.

        The env's frames are kept as they come (a rollout keeps the same tensors), with
        two exceptions, so that every kept frame shows what the env returned:

        - the first frame of a video is a copy; its source is remembered, so an env
          that writes each frame into one buffer is found at the second frame;
        - a frame in memory the recorder already holds (an env writing into its own
          buffers, or a tensor edited in place since it was kept) turns the recorder
          to copies until the next video; the frames still held by reference are
          copied then, before the env can overwrite them.

        Frames on another device, or requiring grad, are always copied to the CPU.
        """
        state = self.__dict__
        obs = self.obs
        if not obs:  # a new video (dumped, or the frames dropped): start over
            state["_held"] = held = {}
            state["_copying"] = False
        else:
            held = state["_held"]
        if not frame.is_cpu or frame.requires_grad:
            obs.append(frame.detach().to("cpu", copy=True))
            return
        if state["_copying"]:
            obs.append(frame.clone())
            return
        address = frame.data_ptr()
        # private (torch): _version counts the in-place edits of a tensor's memory
        version = frame._version
        seen = held.get(address)
        if seen is not None and not (seen[0] is frame and seen[1] == version):
            # memory the recorder holds was written again: copy from now on
            self._copy_held(address)
            obs.append(frame.clone())
            return
        held[address] = (frame, version)  # kept alive: its address stays its own
        obs.append(frame.clone() if len(obs) == 0 else frame)

    def _copy_held(self, overwritten: int) -> None:
        """Replace the frames held by reference by copies; the recorder copies from now on."""
        state = self.__dict__
        state["_copying"] = True
        held = state.pop("_held")
        state["_held"] = {}
        by_reference = {id(frame) for frame, _ in held.values()}
        lost = 0
        for index, kept in enumerate(self.obs):
            if id(kept) in by_reference:
                if kept.data_ptr() == overwritten:
                    lost += 1  # written over before anything could see it
                else:
                    self.obs[index] = kept.clone()
        if lost:
            warnings.warn(
                f"VideoRecorder ({self.tag!r}): the env wrote a new frame into the memory of "
                f"{lost} earlier frame(s), which now show the new image. Have the env return "
                f"a new tensor at each step (or a copy of its buffer).",
                stacklevel=3,
            )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def _frames(self) -> torch.Tensor:
        """The kept frames as one ``[T, 3, H, W]`` uint8 video."""
        key = self.in_keys[0] if self.in_keys else None
        videos = []
        for frame in self.obs:
            frame = _to_uint8(_channels_first(self.tag or "", key, frame))
            if self.center_crop:
                frame = CenterCrop(self.center_crop)._chw(frame)
            if frame.ndim == 3:
                videos.append(frame.unsqueeze(0))
            elif self.make_grid:
                videos.append(make_video_grid(frame.flatten(0, -4)).unsqueeze(0))
            else:
                videos.append(frame.flatten(0, -4))
        return torch.cat(videos, 0)

    def dump(self, suffix: str | None = None, step: int | None = None) -> None:
        """Write the kept frames to the logger as one video and forget them.

        A no-op for the logger when no frame was kept.

        Args:
            suffix (str, optional): appended to the tag (``<tag>_<suffix>``). Defaults to ``None``.
            step (int, optional): the logger step. Defaults to the number of dumps so far.
        """
        if self.obs and self.logger is not None:
            video = self._frames().unsqueeze(0)
            tag = self.tag if suffix is None else f"{self.tag}_{suffix}"
            self.logger.log_video(
                name=tag, video=video, step=self.iter if step is None else step, **self.video_kwargs
            )
        self.obs = []
        self.iter += 1
        self.count = 0

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def __repr__(self) -> str:
        return f"VideoRecorder(tag={self.tag!r}, in_keys={self.in_keys}, frames={len(self.obs)})"


class TensorDictRecorder(Transform):
    """TensorDict recorder.

    Keeps every ``skip``-th step output (only ``in_keys`` when given) and, on
    :meth:`dump`, saves their stack to ``<out_file_base>[_<suffix>]_tensordict.t``.
    The file holds plain tensors in nested dicts (``{"batch_size": [...],
    "data": {...}}``): it loads with ``torch.load(path, weights_only=True)`` and
    never runs code.

    Args:
        out_file_base (str): the path prefix of the saved files.
        skip_reset (bool, optional): leave out the first kept tensordict (usually the
            reset's). Defaults to ``True``.
        skip (int, optional): keep one step every ``skip`` calls. Defaults to ``4``.
        in_keys (sequence of NestedKey, optional): the entries kept. Defaults to all.

    Raises:
        ValueError: if ``skip`` is not a positive int.

    Examples:
        >>> import tempfile, os, torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> base = os.path.join(tempfile.mkdtemp(), "run")
        >>> env = TransformedEnv(CountingEnv(max_steps=20), TensorDictRecorder(base, skip=1, in_keys=["observation"]))
        >>> _ = env.rollout(3)
        >>> env.transform.dump()
        >>> saved = TensorDictRecorder.load(base + "_tensordict.t")
        >>> saved["observation"].squeeze(-1)
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        out_file_base: str,
        skip_reset: bool = True,
        skip: int = 4,
        in_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        if not isinstance(skip, int) or skip < 1:
            raise ValueError(f"TensorDictRecorder expected skip >= 1 (an int), got {skip!r}.")
        super().__init__(in_keys=in_keys or [])
        self.out_file_base = str(out_file_base)
        self.skip_reset = skip_reset
        self.skip = skip
        self.iter = 0
        self.count = 0
        self.td: list[TensorDictBase] = []

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        if self.count % self.skip == 0:
            kept = next_tensordict.select(*self.in_keys) if self.in_keys else next_tensordict
            self.td.append(kept.clone())
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def dump(self, suffix: str | None = None) -> None:
        """Save the kept steps (stacked along a new first dim) and forget them.

        Args:
            suffix (str, optional): appended to the file base (``<base>_<suffix>``).
                Defaults to ``None``.
        """
        tag = self.out_file_base if suffix is None else f"{self.out_file_base}_{suffix}"
        kept = self.td[1:] if self.skip_reset else self.td
        if kept:
            stacked = torch.stack([td.to_tensordict() for td in kept], 0).contiguous()
            payload = {"batch_size": list(stacked.batch_size), "data": stacked.to_dict()}
            torch.save(payload, f"{tag}_tensordict.t")
        self.iter += 1
        self.count = 0
        self.td = []

    @staticmethod
    def load(path: str | Path) -> TensorDictBase:
        """Read a file written by :meth:`dump` (tensors only; no code is run)."""
        payload = torch.load(path, weights_only=True)
        return TensorDict(payload["data"], batch_size=payload["batch_size"])


class PixelRenderTransform(Transform):
    """A transform to call render on the parent environment and register the pixel observation in the tensordict.

    After every reset and step, the parent env's ``render_method`` is called and
    its image (a numpy array or tensor; a list of them for batched envs) is written
    at ``out_keys[0]``. The observation spec gets the entry from a first render.

    Args:
        out_keys (sequence of NestedKey, optional): where the image goes. Defaults to
            ``["pixels"]``.
        preproc (callable, optional): applied to each rendered array. Defaults to ``None``.
        as_non_tensor (bool, optional): store the image as non-tensor data (no shape
            check). Defaults to ``True`` only when a batched env renders a single image.
        render_method (str, optional): the parent's method to call. Defaults to ``"render"``.
        pass_tensordict (bool, optional): pass the step output to the render method.
            Defaults to ``False``.
        **kwargs: keyword arguments for the render method.

    Raises:
        ValueError: if more than one out_key is given, or the parent has no callable
            ``render_method`` (when the transform runs).

    Examples:
        >>> import numpy as np
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> class Drawable(CountingEnv):
        ...     def render(self):
        ...         return np.full((4, 6, 3), 7, dtype=np.uint8)
        >>> env = TransformedEnv(Drawable(max_steps=5), PixelRenderTransform())
        >>> data = env.rollout(2)
        >>> data["pixels"].shape, data["next", "pixels"].dtype
        (torch.Size([2, 4, 6, 3]), torch.uint8)
    """

    def __init__(
        self,
        out_keys: KeyArg = None,
        preproc: Callable[[Any], Any] | None = None,  # Any: numpy arrays or tensors
        as_non_tensor: bool | None = None,
        render_method: str = "render",
        pass_tensordict: bool = False,
        **kwargs: Any,  # Any: render method options
    ) -> None:
        super().__init__()
        self.out_keys = ["pixels"] if out_keys is None else out_keys  # written, read from none
        if len(self.out_keys) != 1:
            raise ValueError(
                f"PixelRenderTransform expected one out_key, got out_keys={self.out_keys}. "
                f"Pass a single key, e.g. out_keys=['pixels']."
            )
        self.preproc = preproc
        self.as_non_tensor = as_non_tensor
        self.render_method = render_method
        self.pass_tensordict = pass_tensordict
        self.kwargs = kwargs
        self._enabled = True

    def _render(
        self, next_tensordict: TensorDictBase
    ) -> tuple[Any, Any]:  # Any: the parent env and its rendered image(s)
        parent = self._lazy.get("parent")
        if parent is None:
            parent = self._lazy["parent"] = self.parent
        if parent is None:
            raise RuntimeError(
                "PixelRenderTransform renders its parent environment and needs one: use it "
                "in a TransformedEnv (env.append_transform(PixelRenderTransform()))."
            )
        method = getattr(parent, self.render_method, None)
        if not callable(method):
            raise ValueError(
                f"PixelRenderTransform expected the parent env to have a callable "
                f"{self.render_method!r} method, found {method!r} on {type(parent).__name__}. "
                f"Pass render_method= naming the env's render function."
            )
        args = (next_tensordict,) if self.pass_tensordict else ()
        return parent, method(*args, **self.kwargs)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self._enabled:
            return next_tensordict
        parent, array = self._render(next_tensordict)
        if self.preproc is not None:
            array = self.preproc(array)
        if isinstance(array, (list, tuple)):
            array = np.stack([np.asarray(a) for a in array])
        if isinstance(array, np.ndarray):
            array = torch.from_numpy(np.ascontiguousarray(array))
        if self.as_non_tensor is None:
            self.as_non_tensor = bool(parent.batch_size) and array.ndim == 3
        key = self.out_keys[0]
        if self.as_non_tensor:
            next_tensordict.set_non_tensor(key, array)
        else:
            expected = tuple(next_tensordict.batch_size)
            if tuple(array.shape[: len(expected)]) != expected:
                raise ValueError(
                    f"PixelRenderTransform expected the rendered image at {key!r} to start with "
                    f"the batch shape {expected}, got shape {tuple(array.shape)}. Reshape it "
                    f"with preproc=, or pass as_non_tensor=True."
                )
            next_tensordict.set(key, array)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        enabled, self._enabled = self._enabled, True
        try:
            probe = self._call(self.parent.reset())
        finally:
            self._enabled = enabled
        value = probe.get(self.out_keys[0])
        shape = observation_spec.shape
        if self.as_non_tensor:
            spec = NonTensor(shape=shape, device=observation_spec.device)
        else:
            spec = Unbounded(shape=value.shape, dtype=value.dtype, device=observation_spec.device)
        observation_spec[self.out_keys[0]] = spec
        return observation_spec

    def switch(self, mode: str | bool | None = None) -> None:
        """Turn rendering on or off (``"on"``, ``"off"``, a bool, or toggle when ``None``).

        Raises:
            ValueError: for any other ``mode``.
        """
        if mode is None:
            mode = not self._enabled
        elif mode in ("on", "off"):
            mode = mode == "on"
        elif not isinstance(mode, bool):
            raise ValueError(
                f"PixelRenderTransform.switch expected 'on', 'off', a bool or None, got {mode!r}."
            )
        self._enabled = mode

    @property
    def enabled(self) -> bool:
        """Whether the transform renders."""
        return self._enabled
