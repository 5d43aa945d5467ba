"""VideoRecorder, TensorDictRecorder and PixelRenderTransform."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rl_envs_core.testing import CountingEnv
from rl_transforms import (
    Compose,
    PixelRenderTransform,
    TensorDictRecorder,
    TransformedEnv,
    VideoRecorder,
)
from rl_transforms._recorders import make_video_grid
from rl_transforms.loggers import CSVLogger


class VideoSink:
    """A logger stand-in that keeps the videos it is given."""

    def __init__(self):
        self.videos = []

    def log_video(self, name, video, step=None, **kwargs):
        self.videos.append((name, video, step, kwargs))


def frames(shape, dtype=torch.uint8):
    return torch.arange(int(np.prod(shape))).reshape(shape).remainder(256).to(dtype)


class TestVideoRecorder:
    @pytest.mark.parametrize(
        ("frame_shape", "expected"),
        [
            ((3, 6, 8), (3, 6, 8)),  # channels first
            ((6, 8, 3), (3, 6, 8)),  # channels last
            ((1, 6, 8), (3, 6, 8)),  # gray channels first
            ((6, 8, 1), (3, 6, 8)),  # gray channels last
            ((6, 8), (3, 6, 8)),  # gray, no channel dim
        ],
    )
    def test_layouts_become_t_3_h_w_uint8(self, frame_shape, expected):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        for _ in range(4):
            recorder(TensorDict({"pixels": frames(frame_shape)}))
        recorder.dump()
        ((name, video, step, _),) = sink.videos
        assert (name, step) == ("clip", 0)
        assert video.shape == (1, 4, *expected) and video.dtype == torch.uint8

    def test_channels_last_pixels_keep_their_values(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        image = frames((6, 8, 3))
        recorder(TensorDict({"pixels": image}))
        recorder.dump()
        assert torch.equal(sink.videos[0][1][0, 0], image.permute(2, 0, 1))

    def test_float_images_in_unit_range_are_scaled(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        recorder(TensorDict({"pixels": torch.full((3, 4, 4), 0.5)}))
        recorder.dump()
        assert sink.videos[0][1].unique().tolist() == [128]

    def test_skip_keeps_one_frame_in_skip(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=3)
        for _ in range(9):
            recorder(TensorDict({"pixels": frames((3, 4, 4))}))
        recorder.dump()
        assert sink.videos[0][1].shape[1] == 3

    def test_default_skip_is_two_in_an_unbatched_env_and_one_in_a_batched_env(self):
        single = TransformedEnv(CountingEnv(), VideoRecorder(None, "t", in_keys=["observation"]))
        batched = TransformedEnv(
            CountingEnv(batch_size=[2]), VideoRecorder(None, "t", in_keys=["observation"])
        )
        assert (single.transform.skip, batched.transform.skip) == (2, 1)
        assert VideoRecorder(None, "t").skip == 1

    def test_batched_frames_become_a_grid_in_an_env(self, continuous_env):
        sink = VideoSink()
        env = TransformedEnv(continuous_env(batch_size=[3], pixels=True), VideoRecorder(sink, "g"))
        env.rollout(3)
        env.transform.dump()
        video = sink.videos[0][1]
        # reset + 3 steps, one frame in one (batched env): 4 frames of a 2x2 grid of 8x8 images
        assert video.shape == (1, 4, 3, 16, 16)
        assert video[0, 0, :, 8:, 8:].eq(0).all()  # the fourth cell is padding

    def test_batched_frames_without_grid_are_consecutive(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", make_grid=False)
        recorder(TensorDict({"pixels": frames((5, 3, 4, 4))}, [5]))
        recorder.dump()
        assert sink.videos[0][1].shape == (1, 5, 3, 4, 4)

    def test_center_crop(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", center_crop=2, skip=1)
        image = frames((3, 6, 6))
        recorder(TensorDict({"pixels": image}))
        recorder.dump()
        assert torch.equal(sink.videos[0][1][0, 0], image[:, 2:4, 2:4])

    def test_frames_are_copies(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        image = torch.zeros(3, 4, 4, dtype=torch.uint8)
        recorder(TensorDict({"pixels": image}))
        image.fill_(9)  # an env writing its next frame into the same buffer
        recorder.dump()
        assert sink.videos[0][1].eq(0).all()

    @pytest.mark.parametrize("requires_grad", [False, True])
    def test_kept_frames_equal_the_env_frames(self, requires_grad):
        recorder = VideoRecorder(None, "clip", skip=1)
        images = [torch.rand(3, 4, 4, requires_grad=requires_grad) for _ in range(3)]
        for image in images:
            recorder(TensorDict({"pixels": image}))
        assert len(recorder.obs) == 3 and recorder.count == 3
        for kept, image in zip(recorder.obs, images):
            assert not kept.requires_grad
            assert torch.equal(kept, image.detach())
        # the first frame of a video is a copy, new frames after it are kept as they are
        assert recorder.obs[0] is not images[0]
        if not requires_grad:
            assert recorder.obs[1] is images[1] and recorder.obs[2] is images[2]

    def test_one_buffer_written_in_place(self):
        # an env returning the same tensor, written in place at every step
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        buffer = torch.zeros(3, 4, 4, dtype=torch.uint8)
        for value in range(5):
            recorder(TensorDict({"pixels": buffer.fill_(value)}))
        buffer.fill_(99)
        recorder.dump()
        video = sink.videos[0][1][0]
        assert [int(frame.max()) for frame in video] == [0, 1, 2, 3, 4]

    def test_numpy_buffer_shared_with_the_frames(self):
        # an env returning torch.from_numpy of one numpy array it overwrites
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1, in_keys=["pixels"])
        array = np.zeros((4, 4, 3), dtype=np.uint8)
        for value in range(4):
            array[...] = value
            recorder(TensorDict({"pixels": torch.from_numpy(array)}))
        recorder.dump()
        assert [int(frame.max()) for frame in sink.videos[0][1][0]] == [0, 1, 2, 3]

    def test_buffers_used_in_turn(self):
        # three buffers in rotation: the reuse shows at the fourth frame, before the
        # frames held by reference are written over
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        buffers = [torch.zeros(3, 4, 4, dtype=torch.uint8) for _ in range(3)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for step in range(8):
                recorder(TensorDict({"pixels": buffers[step % 3].fill_(step)}))
        recorder.dump()
        assert [int(frame.max()) for frame in sink.videos[0][1][0]] == list(range(8))

    def test_frame_edited_after_it_was_kept_warns(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        first, second = frames((3, 4, 4)), torch.zeros(3, 4, 4, dtype=torch.uint8)
        recorder(TensorDict({"pixels": first}))
        recorder(TensorDict({"pixels": second}))  # held by reference
        with pytest.warns(UserWarning, match=r"'clip'.*1 earlier frame.*new tensor"):
            recorder(TensorDict({"pixels": second.fill_(7)}))
        assert len(recorder.obs) == 3

    def test_same_unchanged_frame_twice(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1)
        image = frames((3, 4, 4))
        for _ in range(3):
            recorder(TensorDict({"pixels": image}))
        recorder.dump()
        assert all(torch.equal(frame, image) for frame in sink.videos[0][1][0])

    def test_dump_clears_and_counts(self):
        sink = VideoSink()
        recorder = VideoRecorder(sink, "clip", skip=1, fps=7)
        recorder(TensorDict({"pixels": frames((3, 4, 4))}))
        recorder.dump(suffix="a")
        recorder.dump()  # nothing kept: nothing logged
        recorder(TensorDict({"pixels": frames((3, 4, 4))}))
        recorder.dump()
        assert [(n, s, k) for n, _, s, k in sink.videos] == [
            ("clip_a", 0, {"fps": 7}),
            ("clip", 2, {"fps": 7}),
        ]
        assert recorder.obs == []

    def test_dump_through_compose(self):
        sink = VideoSink()
        env = TransformedEnv(
            Drawable(max_steps=50),
            Compose(PixelRenderTransform(), VideoRecorder(sink, "c", skip=1)),
        )
        env.rollout(2)
        env.transform.dump()
        assert sink.videos[0][1].shape == (1, 3, 3, 4, 6)

    def test_data_passes_through_unchanged(self):
        recorder = VideoRecorder(VideoSink(), "clip", skip=1)
        data = TensorDict({"pixels": frames((3, 4, 4))})
        assert (recorder(data.clone()) == data).all()

    def test_wrong_layout_names_the_key_and_shape(self):
        recorder = VideoRecorder(VideoSink(), "clip", skip=1, in_keys=["obs"])
        recorder(TensorDict({"obs": torch.zeros(4, 5, 7)}))
        with pytest.raises(ValueError, match=r"'obs'.*\[\.\.\., C, H, W\].*\(4, 5, 7\)"):
            recorder.dump()

    @pytest.mark.parametrize("kwargs", [{"skip": 0}, {"center_crop": -1}, {"skip": 1.5}])
    def test_bad_arguments_are_rejected(self, kwargs):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            VideoRecorder(None, "clip", **kwargs)

    def test_env_output_is_written_as_mp4_by_csv_logger(self, tmp_path, continuous_env):
        av = pytest.importorskip("av")
        logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4")
        env = TransformedEnv(
            continuous_env(pixels=True, max_steps=20), VideoRecorder(logger, "run", skip=1)
        )
        env.rollout(5)
        env.transform.dump()
        with av.open(str(tmp_path / "exp" / "videos" / "run_0.mp4")) as container:
            decoded = list(container.decode(video=0))
        assert len(decoded) == 6 and (decoded[0].width, decoded[0].height) == (8, 8)


class TestTensorDictRecorder:
    def test_dump_saves_the_kept_steps(self, tmp_path):
        base = str(tmp_path / "run")
        env = TransformedEnv(CountingEnv(max_steps=50), TensorDictRecorder(base, skip=2))
        env.rollout(6)
        env.transform.dump()
        saved = TensorDictRecorder.load(base + "_tensordict.t")
        # reset + 6 steps = 7 calls, every 2nd kept (3), the first of them skipped (reset)
        assert saved.batch_size == (2,)
        assert saved["observation"].squeeze(-1).tolist() == [3.0, 5.0]
        assert "reward" in saved.keys()

    def test_in_keys_select_entries_and_suffix_names_the_file(self, tmp_path):
        base = str(tmp_path / "run")
        recorder = TensorDictRecorder(base, skip=1, skip_reset=False, in_keys=["a"])
        for i in range(3):
            recorder(TensorDict({"a": torch.tensor([float(i)]), "b": torch.zeros(1)}))
        recorder.dump(suffix="x")
        saved = TensorDictRecorder.load(base + "_x_tensordict.t")
        assert list(saved.keys()) == ["a"] and saved["a"].squeeze(-1).tolist() == [0.0, 1.0, 2.0]
        assert recorder.td == []

    def test_file_holds_no_pickled_objects(self, tmp_path):
        base = str(tmp_path / "run")
        recorder = TensorDictRecorder(base, skip=1, skip_reset=False)
        recorder(TensorDict({"a": torch.zeros(2)}))
        recorder.dump()
        payload = torch.load(base + "_tensordict.t", weights_only=True)
        assert payload["batch_size"] == [1]

    def test_bad_skip_is_rejected(self, tmp_path):
        with pytest.raises(ValueError, match="skip"):
            TensorDictRecorder(str(tmp_path), skip=0)


class Drawable(CountingEnv):
    def __init__(self, image_shape=(4, 6, 3), **kwargs):
        super().__init__(**kwargs)
        self.image_shape = image_shape
        self.renders = 0

    def render(self, scale=1):
        self.renders += 1
        return np.full(self.image_shape, int(self.count.flatten()[0]) * scale, dtype=np.uint8)


class TestPixelRenderTransform:
    def test_rendered_images_are_written_and_specced(self):
        env = TransformedEnv(Drawable(max_steps=10), PixelRenderTransform(scale=2))
        data = env.rollout(3)
        assert env.observation_spec["pixels"].shape == (4, 6, 3)
        assert data["next", "pixels"][:, 0, 0, 0].tolist() == [2, 4, 6]
        assert data["pixels"][0].eq(0).all()

    def test_preproc_and_out_key(self):
        t = PixelRenderTransform(out_keys=["img"], preproc=lambda a: np.moveaxis(a, -1, 0))
        env = TransformedEnv(Drawable(max_steps=10), t)
        assert env.rollout(2)["next", "img"].shape == (2, 3, 4, 6)

    def test_batched_env_rendering_a_list(self):
        class BatchedDrawable(Drawable):
            def render(self):
                return [np.zeros((4, 6, 3), dtype=np.uint8)] * self.batch_size[0]

        env = TransformedEnv(BatchedDrawable(batch_size=[2]), PixelRenderTransform())
        assert env.rollout(2)["next", "pixels"].shape == (2, 2, 4, 6, 3)

    def test_batched_env_rendering_one_image_stores_non_tensor(self):
        env = TransformedEnv(Drawable(batch_size=[2]), PixelRenderTransform())
        data = env.reset()
        assert env.transform.as_non_tensor
        assert np.asarray(data.get("pixels").tolist()).shape[-3:] == (4, 6, 3)

    def test_switch_turns_rendering_off_and_on(self):
        env = TransformedEnv(Drawable(max_steps=10), PixelRenderTransform())
        env.transform.switch()
        assert not env.transform.enabled
        assert "pixels" not in env.reset().keys()
        env.transform.switch("on")
        assert "pixels" in env.reset().keys()

    def test_bad_switch_mode(self):
        with pytest.raises(ValueError, match="'maybe'"):
            PixelRenderTransform().switch("maybe")

    def test_missing_render_method_is_reported(self):
        with pytest.raises(ValueError, match="'draw'"):
            TransformedEnv(CountingEnv(), PixelRenderTransform(render_method="draw"))

    def test_image_not_matching_the_batch_is_reported(self):
        with pytest.raises(ValueError, match=r"'pixels'.*\(2,\)"):
            TransformedEnv(
                Drawable(batch_size=[2], image_shape=(3, 4, 6, 3)),
                PixelRenderTransform(as_non_tensor=False),
            )

    def test_more_than_one_out_key_is_rejected(self):
        with pytest.raises(ValueError, match="one out_key"):
            PixelRenderTransform(out_keys=["a", "b"])

    def test_stand_alone_use_needs_an_env(self):
        with pytest.raises(RuntimeError, match="TransformedEnv"):
            PixelRenderTransform()(TensorDict())


def test_make_video_grid_places_images_row_major():
    images = torch.arange(4, dtype=torch.uint8).view(4, 1, 1, 1).expand(4, 3, 2, 2)
    grid = make_video_grid(images)
    assert grid[0, ::2, ::2].tolist() == [[0, 1], [2, 3]]
