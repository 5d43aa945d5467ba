"""The seeds' cross-package examples, run on our API with only the imports changed.

Examples that use ``torchrl.collectors.SyncDataCollector`` (not part of the envs/data
API we implement) collect with ``env.rollout`` instead; everything else is verbatim.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tensordict import assert_allclose_td

from rl_stack.data import (
    H5StorageCheckpointer,
    LazyMemmapStorage,
    LazyTensorStorage,
    ReplayBuffer,
    SliceSampler,
)
from rl_stack.envs import (
    AsyncEnvPool,
    GymEnv,
    ParallelEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)

pytest.importorskip("gymnasium")


def test_parallel_env_attributes_are_gathered_from_workers():
    # 000, "Parallel environment" / "Parallel environment attributes" (on CPU, no pixels)
    def make_env():
        return GymEnv("Pendulum-v1", g=9.81)

    check_env_specs(make_env())
    env = ParallelEnv(4, make_env)
    try:
        assert env.batch_size == torch.Size([4])
        a, b, c, d = env.g  # gets the g-force of the various envs
        assert a == b == c == d == 9.81
    finally:
        env.close()


def test_async_env_pool_seed_example_with_different_specs():
    # 000, "Async environments": two envs with different specs, lazily stacked
    env = AsyncEnvPool(
        [partial(GymEnv, "Pendulum-v1"), partial(GymEnv, "CartPole-v1")],
        stack="lazy",
        backend="threading",
    )
    try:
        reset = env.reset()
        s = env.rand_step(reset)
        assert s[0]["observation"].shape == torch.Size([3])  # Pendulum
        assert s[1]["observation"].shape == torch.Size([4])  # CartPole
        s0 = s[0]
        s0["action"] = torch.randn(1).clamp(-1, 1)
        s0["env_index"] = 0
        env.async_step_send(s0)
        s0_result = env.async_step_recv()
        # results come back as a batch of the envs that finished: here env 0 alone
        assert s0_result["env_index"].tolist() == [0]
        assert s0_result["next", "observation"].shape == torch.Size([1, 3])
    finally:
        env.close()


def test_slice_sampler_on_stored_cartpole_trajectories():
    # 002, "Storing trajectories": a flat storage of single-env transitions; the seed's
    # strict_length=False allows short slices, so the slices are checked one by one.
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    env.set_seed(0)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(
            num_slices=8, end_key=("next", "done"), truncated_key=None, strict_length=False
        ),
        batch_size=64,
    )
    while len(rb) < 100:
        rb.extend(env.rollout(10, break_when_any_done=False))
    assert len(rb) == 100
    sample = rb.sample()
    assert sample.shape[0] <= 64
    counts = sample["next", "step_count"].squeeze(-1)
    # a slice never crosses an episode end: its step counts are consecutive
    starts = torch.cat([torch.tensor([True]), counts[1:] != counts[:-1] + 1])
    slice_ids = starts.cumsum(0)
    for slice_id in slice_ids.unique():
        slice_counts = counts[slice_ids == slice_id]
        assert torch.equal(
            slice_counts, torch.arange(slice_counts[0], slice_counts[0] + len(slice_counts))
        )
        assert not sample["next", "done"].squeeze(-1)[slice_ids == slice_id][:-1].any()


def test_ndim2_storage_of_a_serial_env_rounds_capacity_and_checkpoints_to_h5(tmp_path):
    # 002, "Checkpointing Replay Buffers": H5 checkpointer, 3 envs, ndim=2
    pytest.importorskip("h5py")
    env = SerialEnv(3, lambda: GymEnv("CartPole-v1", device=None))
    try:
        env.set_seed(0)
        torch.manual_seed(0)
        rb = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
        rb_test = ReplayBuffer(storage=LazyMemmapStorage(100, ndim=2))
        rb.storage.checkpointer = H5StorageCheckpointer()
        rb_test.storage.checkpointer = H5StorageCheckpointer()
        for _ in range(3):
            data = env.rollout(22, break_when_any_done=False)
            rb.extend(data)
            assert rb._storage.max_size == 102
            rb.dumps(tmp_path)
            rb_test.loads(tmp_path)
            assert_allclose_td(rb_test[:], rb[:])
    finally:
        env.close()


def _decoded_frames(path):
    av = pytest.importorskip("av")
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def test_video_recorder_writes_an_mp4_through_the_csv_logger(tmp_path, monkeypatch):
    # 000, "Recording videos" (envs_27): ALE/Pong-v5 needs the Atari ROMs, absent here; a
    # CartPole rendered by PixelRenderTransform gives the pixels instead. The rest is verbatim.
    pytest.importorskip("av")
    pytest.importorskip("pygame")  # CartPole's rgb_array renderer
    from rl_stack.envs import PixelRenderTransform
    from rl_stack.record import CSVLogger, VideoRecorder

    monkeypatch.chdir(tmp_path)
    logger = CSVLogger("dummy-exp", video_format="mp4")
    env = GymEnv("CartPole-v1", render_mode="rgb_array").append_transform(PixelRenderTransform())
    env = env.append_transform(VideoRecorder(logger, tag="rendered", in_keys=["pixels"]))
    env.set_seed(0)
    data = env.rollout(10)
    env.transform.dump()  # Save the video and clear cache
    frames = _decoded_frames(tmp_path / "csv_logs" / "dummy-exp" / "videos" / "rendered_0.mp4")
    # one frame in two (skip=2 for a single env) of the reset and the steps
    assert len(frames) == (data.shape[0] + 1) // 2
    assert frames[0].shape == (400, 600, 3)
    assert env.transform[-1].obs == []


def test_pixel_render_transform_over_a_parallel_env(tmp_path, monkeypatch):
    # 000, "Recording videos" (envs_28), verbatim but for 4 workers instead of 16 (CI has 2 cores)
    pytest.importorskip("av")
    pytest.importorskip("pygame")
    from rl_stack.envs import EnvCreator
    from rl_stack.record.loggers import CSVLogger
    from rl_stack.record.recorder import PixelRenderTransform, VideoRecorder

    monkeypatch.chdir(tmp_path)

    def make_env():
        env = GymEnv("CartPole-v1", render_mode="rgb_array")
        # Uncomment this line to execute per-env
        # env = env.append_transform(PixelRenderTransform())
        return env

    logger = CSVLogger("dummy", video_format="mp4")
    env = ParallelEnv(4, EnvCreator(make_env))
    env.start()
    # Comment this line to execute per-env
    env = env.append_transform(PixelRenderTransform())
    env = env.append_transform(VideoRecorder(logger=logger, tag="pixels_record"))
    try:
        env.rollout(3)
        check_env_specs(env)
        r = env.rollout(30)
        assert r["pixels"].shape[-3:] == (400, 600, 3)
        env.transform.dump()
    finally:
        env.close()
    frames = _decoded_frames(tmp_path / "csv_logs" / "dummy" / "videos" / "pixels_record_0.mp4")
    assert frames[0].shape == (800, 1200, 3)  # the 4 workers' images in a 2 x 2 grid
    assert len(frames) > r.shape[-1]  # every reset and step since the recorder was attached


def test_transform_action_spec_loop_from_inner_to_outer_transform():
    # 000, "Transforming Tensors and Specs" (envs_16): the loop is verbatim; the env and
    # the transforms it runs over are ours (a Pendulum with two action transforms).
    from rl_stack.envs import ActionDiscretizer, Compose, DoubleToFloat

    def transform_action_spec(self, action_spec):
        for t in self.transform:
            action_spec = t.transform_action_spec(action_spec)
        return action_spec

    env = TransformedEnv(
        GymEnv("Pendulum-v1"),
        Compose(DoubleToFloat(in_keys_inv=["action"]), ActionDiscretizer(num_intervals=5)),
    )
    try:
        leaf = transform_action_spec(env, env.base_env.action_spec.clone())
        assert leaf == env.action_spec  # a single leaf spec goes through each transform
        full = transform_action_spec(env, env.base_env.full_action_spec.clone())
        assert full["action"] == env.action_spec
    finally:
        env.close()


def test_action_mask_transform_on_an_env_with_masked_actions():
    # 000, "Environments with masked actions" / "How to use the action mask transform"
    # (envs_26): the wrapping is verbatim; `your_base_env` is written here, TorchRL
    # style: its _step returns "done" only (terminated/truncated are completed for it).
    from tensordict import TensorDict

    from rl_stack.data import Categorical, Composite, Unbounded
    from rl_stack.envs import ActionMask, EnvBase

    class Corridor(EnvBase):
        """Five cells; the action moves left (0), stays (1) or moves right (2) when allowed."""

        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(
                position=Unbounded(shape=(1,), dtype=torch.int64),
                action_mask=Categorical(2, shape=(3,), dtype=torch.bool),
            )
            self.action_spec = Categorical(3, shape=())
            self.reward_spec = Unbounded(shape=(1,))
            self.position = 0

        def _observe(self):
            mask = torch.tensor([self.position > 0, True, self.position < 4])
            return TensorDict(
                position=torch.tensor([self.position]), action_mask=mask, batch_size=()
            )

        def _reset(self, tensordict=None):
            self.position = 0
            return self._observe()

        def _step(self, tensordict):
            self.position += int(tensordict["action"]) - 1
            assert 0 <= self.position <= 4  # the mask kept the agent inside
            out = self._observe()
            out["reward"] = torch.tensor([float(self.position == 4)])
            out["done"] = torch.tensor([self.position == 4])
            return out

        def _set_seed(self, seed):
            torch.manual_seed(seed)

    your_base_env = Corridor()
    env = TransformedEnv(
        your_base_env,
        ActionMask(action_key="action", mask_key="action_mask"),
    )
    check_env_specs(env)
    env.set_seed(0)
    data = env.rollout(50)
    assert (data["next", "position"] >= 0).all() and (data["next", "position"] <= 4).all()
    # a lone "done" is read as termination, flanked by its "terminated" dual
    assert env.done_keys == ["done", "terminated"]
    assert torch.equal(data["next", "terminated"], data["next", "done"])
