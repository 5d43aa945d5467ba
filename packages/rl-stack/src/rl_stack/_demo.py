"""The ``rl-stack demo``: collect CartPole frames, replay them, checkpoint and reload the buffer.

The run touches every layer once, on embedded defaults (no server, no download):

1. ``ParallelEnv`` of ``GymEnv("CartPole-v1")`` workers (or one ``MultiThreadedEnv`` with
   the EnvPool backend) inside ``TransformedEnv(..., Compose(StepCounter(), RewardSum(),
   DoubleToFloat()))``, driven by a ``RandomPolicy``;
2. rollouts of ``frames_per_batch`` frames written to a ``TensorDictReplayBuffer`` on a
   ``LazyMemmapStorage(ndim=2)``: the storage is laid out ``[time, env]`` so that every
   column is the uninterrupted stream of one env, and a ``SliceSampler`` (trajectory ends
   read from ``("next", "done")``) samples slices that never cross an episode end;
3. sampled slices checked to be contiguous pieces of one trajectory;
4. the buffer dumped with ``dumps``, loaded with ``loads`` into a fresh buffer and compared
   (length, contents, and the samples drawn under one seed).

Expected failures raise :class:`DemoError` with a one-line message; the command line
prints it and exits non-zero.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tensordict import TensorDictBase
from tqdm import tqdm

from rl_stack.data import LazyMemmapStorage, SliceSampler, TensorDictReplayBuffer
from rl_stack.envs import (
    Compose,
    DoubleToFloat,
    EnvBase,
    GymEnv,
    MultiThreadedEnv,
    ParallelEnv,
    RandomPolicy,
    RewardSum,
    StepCounter,
    TransformedEnv,
    step_mdp,
)

__all__ = [
    "BACKENDS",
    "DemoConfig",
    "DemoError",
    "DemoReport",
    "check_round_trip",
    "check_slices",
    "collect",
    "format_report",
    "make_buffer",
    "make_env",
    "run_demo",
]

ENV_NAME = "CartPole-v1"
BACKENDS = ("gym", "envpool")
ENVPOOL_INSTALL = "pip install 'rl-env-adapters[envpool]'"
GYM_INSTALL = "pip install 'rl-env-adapters[gym]'"


class DemoError(RuntimeError):
    """An expected failure of the demo, reported as one line without a traceback."""


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """The demo's settings; the defaults finish well under a minute on two CPU cores.

    Args:
        frames (int, optional): frames to collect (rounded up to whole batches).
            Defaults to ``8192``.
        workers (int, optional): number of envs stepped side by side. Defaults to ``2``.
        device (str, optional): device of the env outputs and of the sampled batches.
            Defaults to ``"cpu"``.
        output_dir (Path, optional): where the storage and the checkpoint are written.
            Defaults to ``None``: a temporary directory, removed at the end.
        backend (str, optional): ``"gym"`` (``ParallelEnv`` of ``GymEnv``) or ``"envpool"``
            (``MultiThreadedEnv``). Defaults to ``"gym"``.
        seed (int, optional): seeds the envs, the policy and the sampling. Defaults to ``0``.
        frames_per_batch (int, optional): frames per rollout. Defaults to ``512``.
        batch_size (int, optional): elements per sampled batch. Defaults to ``256``.
        slice_len (int, optional): steps per sampled slice. Defaults to ``8``.
        num_samples (int, optional): batches sampled to measure samples/s. Defaults to ``50``.
        progress (bool, optional): show a progress bar while collecting (only on a
            terminal). Defaults to ``True``.

    Raises:
        DemoError: if a value is out of range (see :meth:`validate`).
    """

    frames: int = 8192
    workers: int = 2
    device: str = "cpu"
    output_dir: Path | None = None
    backend: str = "gym"
    seed: int = 0
    frames_per_batch: int = 512
    batch_size: int = 256
    slice_len: int = 8
    num_samples: int = 50
    progress: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check the settings; raises :class:`DemoError` naming the bad one and the fix."""
        for name in ("frames", "workers", "frames_per_batch", "batch_size", "slice_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise DemoError(
                    f"--{name.replace('_', '-')} must be a positive int, got {value!r}."
                )
        if self.num_samples < 1:
            raise DemoError(f"num_samples must be a positive int, got {self.num_samples!r}.")
        if self.backend not in BACKENDS:
            raise DemoError(f"--backend must be one of {BACKENDS}, got {self.backend!r}.")
        if self.batch_size % self.slice_len:
            raise DemoError(
                f"batch_size must be a multiple of slice_len, got batch_size={self.batch_size} "
                f"and slice_len={self.slice_len}."
            )
        if self.steps_per_batch < self.slice_len:
            raise DemoError(
                f"each rollout gives {self.steps_per_batch} steps per env, fewer than "
                f"slice_len={self.slice_len}. Raise --frames or lower --workers."
            )
        _check_device(self.device)

    @property
    def steps_per_batch(self) -> int:
        """Steps of every env per rollout."""
        return max(1, min(self.frames, self.frames_per_batch) // self.workers)

    @property
    def num_batches(self) -> int:
        """Rollouts needed to collect at least ``frames`` frames."""
        return math.ceil(self.frames / (self.steps_per_batch * self.workers))


def _check_device(device: str) -> None:
    try:
        parsed = torch.device(device)
    except RuntimeError as err:
        raise DemoError(
            f"--device expects a torch device such as 'cpu' or 'cuda:0', got {device!r}."
        ) from err
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise DemoError(
            f"--device {device!r} needs CUDA, which this machine lacks. Use --device cpu."
        )


@dataclass(kw_only=True)
class DemoReport:
    """What a demo run measured; :func:`format_report` renders it as a table."""

    frames: int
    collect_seconds: float
    samples: int
    sample_seconds: float
    episode_returns: torch.Tensor
    checkpoint_bytes: int
    load_seconds: float
    buffer_len: int
    slices_checked: int
    notes: list[str] = field(default_factory=list)

    @property
    def episodes(self) -> int:
        """Episodes finished during the collection."""
        return int(self.episode_returns.numel())


def make_env(config: DemoConfig) -> EnvBase:
    """Build the transformed, batched CartPole env of the demo.

    Raises:
        DemoError: if the backend is not installed (the message carries the install line).
    """
    if config.backend == "envpool":
        try:
            base = MultiThreadedEnv(config.workers, ENV_NAME, device=config.device)
        except ImportError as err:
            raise DemoError(
                f"--backend envpool needs EnvPool, which is not installed ({err}). "
                f"Install it with: {ENVPOOL_INSTALL}"
            ) from err
    else:
        try:
            GymEnv(ENV_NAME).close()  # fail here, in the parent, rather than in every worker
        except ImportError as err:
            raise DemoError(
                f"--backend gym needs gymnasium, which is not installed ({err}). "
                f"Install it with: {GYM_INSTALL}"
            ) from err
        base = ParallelEnv(config.workers, _make_gym_env, device=config.device)
    env = TransformedEnv(base, Compose(StepCounter(), RewardSum(), DoubleToFloat()))
    env.set_seed(config.seed)
    return env


def _make_gym_env() -> EnvBase:
    return GymEnv(ENV_NAME)


def make_buffer(config: DemoConfig, scratch_dir: Path | None) -> TensorDictReplayBuffer:
    """A replay buffer laid out ``[time, env]`` on memory-mapped storage, sampled in slices."""
    steps = config.steps_per_batch * config.num_batches
    storage = LazyMemmapStorage(steps * config.workers, scratch_dir=scratch_dir, ndim=2)
    sampler = SliceSampler(slice_len=config.slice_len, end_key=("next", "done"))
    return TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=config.batch_size)


def collect(
    env: EnvBase,
    buffer: TensorDictReplayBuffer,
    config: DemoConfig,
    *,
    on_batch: Callable[[int], object] | None = None,
) -> tuple[int, torch.Tensor]:
    """Roll the random policy out in batches and write them to ``buffer``.

    Each rollout continues where the previous one stopped (envs whose episode ended are
    reset), so every column of the storage is the uninterrupted stream of one env.

    Returns:
        the number of frames written and the returns of the episodes that finished.
    """
    policy = RandomPolicy(env.action_spec)
    torch.manual_seed(config.seed)
    state = env.reset()
    frames = 0
    returns = []
    for _ in range(config.num_batches):
        batch = env.rollout(
            config.steps_per_batch,
            policy,
            auto_reset=False,
            tensordict=state,
            break_when_any_done=False,
        )
        state = env.maybe_reset(step_mdp(batch[..., -1]))
        done = batch["next", "done"]
        returns.append(batch["next", "episode_reward"][done])
        buffer.extend(batch.cpu())  # [env, time]: the storage keeps it as [time, env]
        frames += batch.numel()
        if on_batch is not None:
            on_batch(batch.numel())
    return frames, torch.cat(returns)


def check_slices(batch: TensorDictBase, *, slice_len: int) -> int:
    """Check that every slice of a sampled batch is a contiguous piece of one trajectory.

    Within a slice the step counter goes up by one, each step starts from the observation
    the previous one ended on, and only the last step may end an episode.

    Returns:
        the number of slices checked.

    Raises:
        DemoError: naming the first slice that breaks one of these rules.
    """
    slices = batch.reshape(-1, slice_len)
    count = slices["step_count"].squeeze(-1)
    if not (count.diff(dim=-1) == 1).all():
        raise DemoError(f"a sampled slice skips steps: step counts {count.tolist()}.")
    follows = slices["observation"][:, 1:] == slices["next", "observation"][:, :-1]
    if not follows.all():
        raise DemoError(
            "a sampled slice is not contiguous: an observation differs from the previous next one."
        )
    if slices["next", "done"][:, :-1].any():
        raise DemoError("a sampled slice crosses an episode end.")
    return slices.shape[0]


def check_round_trip(
    buffer: TensorDictReplayBuffer, loaded: TensorDictReplayBuffer, *, seed: int
) -> None:
    """Check that ``loaded`` holds what ``buffer`` holds and samples the same under one seed.

    Raises:
        DemoError: naming what differs.
    """
    if len(loaded) != len(buffer):
        raise DemoError(
            f"the reloaded buffer has {len(loaded)} elements, the original {len(buffer)}."
        )
    if not (loaded[:] == buffer[:]).all():
        raise DemoError("the reloaded buffer's contents differ from the original's.")
    torch.manual_seed(seed)
    original = buffer.sample()
    torch.manual_seed(seed)
    reloaded = loaded.sample()
    if not (original == reloaded).all():  # the sampled indices included
        raise DemoError(
            f"under seed {seed} the reloaded buffer samples other data than the original."
        )


@contextmanager
def _workdir(output_dir: Path | None) -> Iterator[Path]:
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        yield output_dir
        return
    with tempfile.TemporaryDirectory(prefix="rl-stack-demo-") as tmp:
        yield Path(tmp)


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_demo(
    config: DemoConfig, *, env_factory: Callable[[DemoConfig], EnvBase] = make_env
) -> DemoReport:
    """Run the whole demo and return its measurements.

    Args:
        config (DemoConfig): the settings.
        env_factory (callable, optional): builds the env from ``config``; its outputs
            need ``"observation"``, ``"step_count"`` and ``("next", "episode_reward")``.
            Defaults to :func:`make_env`.

    Raises:
        DemoError: on an expected failure (missing backend, a failed check).
    """
    with _workdir(config.output_dir) as root:
        storage_dir, checkpoint = root / "storage", root / "checkpoint"
        reloaded_dir = root / "storage-reloaded"
        for path in (storage_dir, checkpoint, reloaded_dir):  # what a previous run left
            if path.exists():
                shutil.rmtree(path)
        buffer = make_buffer(config, storage_dir)
        env = env_factory(config)
        try:
            total = config.num_batches * config.steps_per_batch * config.workers
            with tqdm(
                total=total,
                unit="frame",
                desc="collecting",
                disable=None if config.progress else True,
            ) as bar:
                start = time.perf_counter()
                frames, returns = collect(env, buffer, config, on_batch=bar.update)
                collect_seconds = time.perf_counter() - start
        finally:
            env.close()
        torch.manual_seed(config.seed)
        slices = 0
        start = time.perf_counter()
        for _ in range(config.num_samples):
            batch = buffer.sample().to(config.device)
            slices += check_slices(batch, slice_len=config.slice_len)
        sample_seconds = time.perf_counter() - start
        buffer.dumps(checkpoint)
        checkpoint_bytes = _disk_bytes(checkpoint)
        loaded = make_buffer(config, reloaded_dir)
        start = time.perf_counter()
        loaded.loads(checkpoint)
        load_seconds = time.perf_counter() - start
        check_round_trip(buffer, loaded, seed=config.seed)
    return DemoReport(
        frames=frames,
        collect_seconds=collect_seconds,
        samples=config.num_samples * config.batch_size,
        sample_seconds=sample_seconds,
        episode_returns=returns,
        checkpoint_bytes=checkpoint_bytes,
        load_seconds=load_seconds,
        buffer_len=len(buffer),
        slices_checked=slices,
    )


def _size(num_bytes: int) -> str:
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_report(report: DemoReport, config: DemoConfig) -> str:
    """Render the summary table printed at the end of the demo."""
    returns = report.episode_returns
    mean = f"{returns.mean().item():.1f}" if report.episodes else "n/a"
    best = f"{returns.max().item():.1f}" if report.episodes else "n/a"
    env = (
        f"ParallelEnv({config.workers} x GymEnv)"
        if config.backend == "gym"
        else f"MultiThreadedEnv({config.workers})"
    )
    rows = [
        ("env", f"{ENV_NAME}: {env}"),
        ("frames collected", f"{report.frames}"),
        ("collection", f"{report.frames / report.collect_seconds:,.0f} frames/s"),
        ("sampling", f"{report.samples / report.sample_seconds:,.0f} samples/s"),
        ("contiguous slices checked", f"{report.slices_checked} of {config.slice_len} steps"),
        ("episodes finished", f"{report.episodes}"),
        ("episode return mean / max", f"{mean} / {best}"),
        ("checkpoint size on disk", _size(report.checkpoint_bytes)),
        ("checkpoint load time", f"{report.load_seconds * 1000:.1f} ms"),
        (
            "round trip",
            f"{report.buffer_len} elements identical, same samples under seed {config.seed}",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    rule = "-" * (width + 2 + max(len(value) for _, value in rows))
    lines = ["rl-stack demo summary", rule]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    lines.append(rule)
    return "\n".join(lines)
