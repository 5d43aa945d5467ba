"""The demo's pieces, run in-process on small sizes."""

from __future__ import annotations

import sys

import pytest
import torch

from rl_batched_envs import SerialEnv
from rl_envs_core.testing import CountingEnv
from rl_stack._demo import (
    DemoConfig,
    DemoError,
    DemoReport,
    _size,
    check_round_trip,
    check_slices,
    collect,
    format_report,
    make_buffer,
    make_env,
    run_demo,
)
from rl_transforms import Compose, DoubleToFloat, RewardSum, StepCounter, TransformedEnv

SMALL = {
    "frames": 64,
    "workers": 2,
    "frames_per_batch": 32,
    "batch_size": 16,
    "slice_len": 4,
    "num_samples": 3,
    "progress": False,
}


def _counting_env(max_steps: int = 5) -> TransformedEnv:
    env = SerialEnv(2, lambda: CountingEnv(max_steps=max_steps))
    return TransformedEnv(env, Compose(StepCounter(), RewardSum(), DoubleToFloat()))


@pytest.fixture
def filled():
    """A buffer filled by ``collect`` from two counting envs (episodes of 5 steps)."""
    config = DemoConfig(**SMALL)
    buffer = make_buffer(config, None)
    env = _counting_env()
    frames, returns = collect(env, buffer, config)
    env.close()
    return config, buffer, frames, returns


class TestDemoConfig:
    def test_batches_cover_the_frames(self):
        config = DemoConfig(frames=100, workers=3, frames_per_batch=30)
        assert config.steps_per_batch == 10
        assert config.num_batches * config.steps_per_batch * config.workers >= 100

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"frames": 0}, "--frames must be a positive int"),
            ({"workers": -1}, "--workers must be a positive int"),
            ({"backend": "mujoco"}, "--backend must be one of"),
            ({"batch_size": 10, "slice_len": 4}, "multiple of slice_len"),
            ({"frames": 8, "workers": 4, "slice_len": 4}, "fewer than slice_len"),
            ({"device": "gpu:x"}, "--device expects a torch device"),
            ({"num_samples": 0}, "num_samples must be a positive int"),
        ],
    )
    def test_rejects_bad_values(self, kwargs, match):
        with pytest.raises(DemoError, match=match):
            DemoConfig(**kwargs)

    @pytest.mark.skipif(
        torch.cuda.is_available(), reason="checks the message of a CPU-only machine"
    )
    def test_rejects_cuda_without_cuda(self):
        with pytest.raises(DemoError, match="needs CUDA"):
            DemoConfig(device="cuda")


class TestCollect:
    def test_writes_every_frame_as_time_by_env(self, filled):
        config, buffer, frames, _ = filled
        assert frames == len(buffer) == 64
        data = buffer[:]
        assert data.shape == (config.steps_per_batch * config.num_batches, config.workers)

    def test_columns_are_uninterrupted_streams_across_batches(self, filled):
        _, buffer, _, _ = filled
        data = buffer[:]
        # counting envs: the observation after a step is the next step's observation,
        # unless the episode ended there (then the env was reset to 0)
        follows = data["observation"][1:] == data["next", "observation"][:-1]
        reset = data["next", "done"][:-1] & (data["observation"][1:] == 0)
        assert (follows | reset).all()
        assert (
            data["step_count"][1:]
            == torch.where(data["next", "done"][:-1], 0, data["step_count"][:-1] + 1)
        ).all()

    def test_returns_are_those_of_the_finished_episodes(self, filled):
        _, buffer, _, returns = filled
        assert returns.numel() == int(buffer[:]["next", "done"].sum())
        assert (returns == 5.0).all()  # five steps of reward one

    def test_reports_progress_per_batch(self):
        config = DemoConfig(**SMALL)
        seen = []
        env = _counting_env()
        collect(env, make_buffer(config, None), config, on_batch=seen.append)
        env.close()
        assert seen == [config.steps_per_batch * config.workers] * config.num_batches


class TestCheckSlices:
    def test_sampled_slices_are_contiguous(self, filled):
        config, buffer, _, _ = filled
        batch = buffer.sample()
        assert (
            check_slices(batch, slice_len=config.slice_len) == config.batch_size // config.slice_len
        )

    @pytest.mark.parametrize(
        ("corrupt", "match"),
        [
            (lambda b: b["step_count"].__setitem__(1, 7), "skips steps"),
            (lambda b: b["observation"].__setitem__(1, 99.0), "not contiguous"),
            (lambda b: b["next", "done"].__setitem__(0, True), "crosses an episode end"),
        ],
    )
    def test_rejects_broken_slices(self, filled, corrupt, match):
        config, buffer, _, _ = filled
        batch = buffer[:][:, 0][: config.slice_len].clone()
        batch["next", "done"].zero_()
        batch["step_count"] = torch.arange(config.slice_len).unsqueeze(-1)
        batch["next", "observation"][:-1] = batch["observation"][1:]
        assert check_slices(batch, slice_len=config.slice_len) == 1
        corrupt(batch)
        with pytest.raises(DemoError, match=match):
            check_slices(batch, slice_len=config.slice_len)


class TestCheckRoundTrip:
    def test_dumped_buffer_loads_back_identical(self, filled, tmp_path):
        config, buffer, _, _ = filled
        buffer.dumps(tmp_path / "ckpt")
        loaded = make_buffer(config, tmp_path / "reloaded")
        loaded.loads(tmp_path / "ckpt")
        check_round_trip(buffer, loaded, seed=3)

    def test_rejects_other_contents(self, filled, tmp_path):
        config, buffer, _, _ = filled
        buffer.dumps(tmp_path / "ckpt")
        loaded = make_buffer(config, None)
        loaded.loads(tmp_path / "ckpt")
        loaded.extend(
            buffer[:][:1].apply(lambda x: x + 1).transpose(0, 1).contiguous()
        )  # [env, time]
        with pytest.raises(DemoError, match="contents differ"):
            check_round_trip(buffer, loaded, seed=0)

    def test_rejects_other_samples_under_the_same_seed(self, filled):
        _, buffer, _, _ = filled
        other = make_buffer(DemoConfig(**{**SMALL, "slice_len": 2}), None)
        other.extend(buffer[:].transpose(0, 1).contiguous())  # same contents, shorter slices
        with pytest.raises(DemoError, match="under seed 0 the reloaded buffer samples other data"):
            check_round_trip(buffer, other, seed=0)

    def test_rejects_another_length(self, filled):
        config, buffer, _, _ = filled
        other = make_buffer(config, None)
        other.extend(buffer[:][:4].transpose(0, 1).contiguous())
        with pytest.raises(DemoError, match="has 8 elements, the original 64"):
            check_round_trip(buffer, other, seed=0)


class TestMakeEnv:
    def test_envpool_missing_names_the_extra(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool now fails
        with pytest.raises(DemoError, match=r"pip install 'rl-env-adapters\[envpool\]'"):
            make_env(DemoConfig(backend="envpool"))

    def test_gym_missing_names_the_extra(self, monkeypatch):
        def no_gym(name):  # the adapters cache the backend once found: stand in for its error
            raise ImportError("GymEnv needs gymnasium")

        monkeypatch.setattr("rl_stack._demo.GymEnv", no_gym)
        with pytest.raises(DemoError, match=r"pip install 'rl-env-adapters\[gym\]'"):
            make_env(DemoConfig(backend="gym"))

    def test_gym_backend_builds_transformed_parallel_cartpole(self):
        pytest.importorskip("gymnasium", reason="the gym backend is not installed")
        env = make_env(DemoConfig(workers=2))
        try:
            data = env.rollout(3)
        finally:
            env.close()
        assert data.batch_size == (2, 3)
        assert data["observation"].dtype == torch.float32
        assert {"step_count", "episode_reward"} <= set(data.keys())


class TestRunDemo:
    def test_keeps_output_dir_when_given(self, tmp_path):
        config = DemoConfig(**SMALL, output_dir=tmp_path / "out")
        report = run_demo(config, env_factory=lambda config: _counting_env())
        assert report.frames == report.buffer_len == 64
        assert report.slices_checked == config.num_samples * config.batch_size // config.slice_len
        assert report.episodes == 12  # 32 steps per env, episodes of 5 steps
        assert report.checkpoint_bytes > 0
        assert (tmp_path / "out" / "checkpoint").is_dir()

    def test_reuses_an_output_dir_of_a_previous_run(self, tmp_path):
        config = DemoConfig(**SMALL, output_dir=tmp_path)
        first = run_demo(config, env_factory=lambda config: _counting_env())
        second = run_demo(config, env_factory=lambda config: _counting_env())
        assert first.buffer_len == second.buffer_len == 64
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "checkpoint",
            "storage",
            "storage-reloaded",
        ]

    def test_removes_its_temporary_dir(self, tmp_path, monkeypatch):
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        monkeypatch.setattr("tempfile.tempdir", None)
        run_demo(DemoConfig(**SMALL), env_factory=lambda config: _counting_env())
        assert list(tmp_path.iterdir()) == []

    def test_closes_the_env_when_collection_fails(self):
        env = _counting_env()
        closed = []
        env.close = lambda: closed.append(True)
        env.rollout = lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("worker died"))
        with pytest.raises(RuntimeError, match="worker died"):
            run_demo(DemoConfig(**SMALL), env_factory=lambda config: env)
        assert closed == [True]

    def test_runs_cartpole_end_to_end(self):
        pytest.importorskip("gymnasium", reason="the gym backend is not installed")
        report = run_demo(DemoConfig(**SMALL))
        assert report.frames == report.buffer_len == 64
        assert report.episodes == report.episode_returns.numel()


class TestFormatReport:
    def _report(self, returns):
        return DemoReport(
            frames=100,
            collect_seconds=2.0,
            samples=1000,
            sample_seconds=0.5,
            episode_returns=returns,
            checkpoint_bytes=3 * 1024 * 1024,
            load_seconds=0.01,
            buffer_len=100,
            slices_checked=10,
        )

    def test_lists_rates_returns_and_checkpoint(self):
        text = format_report(self._report(torch.tensor([10.0, 30.0])), DemoConfig())
        assert "50 frames/s" in text
        assert "2,000 samples/s" in text
        assert "20.0 / 30.0" in text
        assert "3.0 MiB" in text
        assert "10.0 ms" in text

    @pytest.mark.parametrize(
        ("num_bytes", "text"),
        [
            (512, "512.0 B"),
            (2048, "2.0 KiB"),
            (5 * 1024**2, "5.0 MiB"),
            (3 * 1024**4, "3072.0 GiB"),
        ],
    )
    def test_sizes_read_in_binary_units(self, num_bytes, text):
        assert _size(num_bytes) == text

    def test_reads_na_without_finished_episodes(self):
        text = format_report(self._report(torch.zeros(0)), DemoConfig(backend="envpool"))
        assert "n/a / n/a" in text
        assert "MultiThreadedEnv(2)" in text
