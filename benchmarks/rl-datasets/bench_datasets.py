"""Offline datasets: converting a D4RL file, sampling the result, preprocessing it.

Questions answered, on a D4RL-layout HDF5 file of ``BENCH_DATASETS_STEPS`` transitions
(default 1,000,000; ``observations`` float32[17], ``actions`` float32[6], ``rewards``,
``terminals``, ``timeouts``, ``infos/qpos`` float64[2]; uncompressed, so that the
conversion and not gzip is measured):

* MB/s (of the source file) of turning the file into TED memory-mapped tensors: ours
  (``D4RLExperienceReplay(download="force")`` served by a local HTTP server), TorchRL's
  ``D4RLExperienceReplay`` (direct download of a ``file://`` URL, its only offline path),
  and the ``floor``: the file copied once, then every dataset read with h5py and written
  with ``np.memmap``.
* samples/s of ``sample(256)`` from the converted dataset (ours, TorchRL) and from a
  plain ``TensorDictReplayBuffer`` over the same storage (the target: the dataset within
  1.1x of the buffer).
* rows/s of ``preprocess`` with 1 and 2 processes (``num_workers``; fork), on the seed's
  example function (``norm``, data_15: ``obs_norm``, the per-transition norm of the
  observation, added to every stored entry) and on a heavier one (``embed``: a frozen
  17 -> 256 -> 8 MLP's embedding of the observation, pre-computed once).  The timed
  call includes starting the workers, writing the new entry, carrying the unmodified
  entries over and reloading the dataset.  The ``floor``: the least work that output
  needs, with plain torch: map the stored observation file and write the function's
  output into a new memory-mapped file; with 2 processes, one ``os.fork()`` and each
  process doing half the rows (the child reaped in the background, as ours does).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from _harness import Context, Workload, run

STEPS = int(os.environ.get("BENCH_DATASETS_STEPS", "1000000"))
DATASET = "hopper-medium-v2"
BATCH = 256
_FILE: list[Path] = []
_FLOOR_SOURCE: list[Path] = []  # the floor's observation file, read only


def _tempdir(prefix: str) -> Path:
    """A fresh temporary folder, removed when the process exits (they hold ~230 MB)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _source() -> Path:
    """The D4RL-layout file, written once per process."""
    if not _FILE:
        import h5py

        folder = _tempdir("bench_d4rl_")
        path = folder / "gym_mujoco_v2" / "hopper_medium-v2.hdf5"
        path.parent.mkdir(parents=True)
        rng = np.random.default_rng(0)
        terminals = np.zeros(STEPS, bool)
        terminals[rng.integers(0, STEPS, STEPS // 1000)] = True
        timeouts = np.zeros(STEPS, bool)
        timeouts[999::1000] = True
        with h5py.File(path, "w") as file:
            file["observations"] = rng.standard_normal((STEPS, 17), dtype=np.float32)
            file["actions"] = rng.standard_normal((STEPS, 6), dtype=np.float32)
            file["rewards"] = rng.standard_normal(STEPS, dtype=np.float32)
            file["terminals"] = terminals
            file["timeouts"] = timeouts
            file["infos/qpos"] = rng.standard_normal((STEPS, 2))
        _FILE.append(path)
    return _FILE[0]


# bytes per transition in the file: observations, actions, rewards, terminals, timeouts, qpos
MEGABYTES = STEPS * (17 * 4 + 6 * 4 + 4 + 1 + 1 + 2 * 8) / 1e6


def convert_ours(ctx: Context):
    from rl_datasets.testing import LocalFileServer

    path = _source()
    server = LocalFileServer(path.parent.parent).__enter__()
    os.environ["RL_DATASETS_D4RL_URL"] = server.url
    root = _tempdir("bench_root_")
    os.environ["TQDM_DISABLE"] = "1"

    def convert():
        ctx.lib.data.D4RLExperienceReplay(DATASET, BATCH, root=root, download="force")

    return convert


def convert_torchrl(ctx: Context):
    import torchrl.data.datasets.d4rl as d4rl

    d4rl.D4RL_DATASETS[DATASET] = _source().as_uri()
    root = _tempdir("bench_root_")

    def convert():
        ctx.lib.data.datasets.D4RLExperienceReplay(
            DATASET, BATCH, root=root, download="force", direct_download=True
        )

    return convert


def convert_floor(ctx: Context):
    import h5py

    path = _source()
    work = _tempdir("bench_floor_")

    def convert():
        copy = work / path.name
        shutil.copyfile(path, copy)
        with h5py.File(copy, "r") as file:
            names = []
            file.visit(
                lambda name: names.append(name) if isinstance(file[name], h5py.Dataset) else None
            )
            for name in names:
                data = file[name][()]
                out = np.memmap(work / name.replace("/", "_"), data.dtype, "w+", shape=data.shape)
                out[:] = data
                out.flush()
                del out
        copy.unlink()

    return convert


def _dataset(ctx: Context):
    root = _tempdir("bench_root_")
    if ctx.name == "torchrl":
        import torchrl.data.datasets.d4rl as d4rl

        d4rl.D4RL_DATASETS[DATASET] = _source().as_uri()
        return ctx.lib.data.datasets.D4RLExperienceReplay(
            DATASET, BATCH, root=root, direct_download=True
        )
    from rl_datasets.testing import LocalFileServer

    os.environ["TQDM_DISABLE"] = "1"
    with LocalFileServer(_source().parent.parent) as server:
        os.environ["RL_DATASETS_D4RL_URL"] = server.url
        return ctx.lib.data.D4RLExperienceReplay(DATASET, BATCH, root=root)


def _warm(dataset):
    """Read every row once: sampling is then timed on cached pages, for every library."""
    dataset[:]
    return dataset


def sample_dataset(ctx: Context):
    return _warm(_dataset(ctx)).sample


def sample_buffer_same_storage(ctx: Context):
    dataset = _warm(_dataset(ctx))
    buffer = ctx.lib.data.TensorDictReplayBuffer(storage=dataset.storage, batch_size=BATCH)
    return buffer.sample


# The preprocess functions: (new entry, its width per row, rows -> values).
def _norm():
    """data_15's function: the per-transition norm of the observation."""
    return "obs_norm", 1, lambda observation: observation.norm(dim=-1)


def _embed():
    """A frozen encoder's embedding of the observation, pre-computed once instead of at
    every sample (what the seed's "Transforming datasets" recommends, as R3MTransform /
    VIPTransform do for pixels): a 17 -> 256 -> 8 MLP."""
    import torch

    torch.manual_seed(0)
    encoder = torch.nn.Sequential(
        torch.nn.Linear(17, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)
    ).requires_grad_(False)
    return "embedding", 8, encoder


FUNCTIONS = {"norm": _norm, "embed": _embed}


def _preprocess(workers: int, function: str):
    def setup(ctx: Context):
        dataset = _dataset(ctx)
        key, _, rows_fn = FUNCTIONS[function]()

        def fn(td):
            return td.set(key, rows_fn(td.get("observation")))

        def call():
            dataset.preprocess(fn, num_workers=workers, mp_start_method="fork")

        return call

    return setup


def _preprocess_floor(workers: int, function: str):
    def setup(ctx: Context):
        import torch

        import rl_stack.data

        # the stored dataset comes from ours (not timed); the timed call is plain torch
        if not _FLOOR_SOURCE:
            ours = Context("rl_stack", ctx.device, SimpleNamespace(data=rl_stack.data))
            _FLOOR_SOURCE.append(_dataset(ours).data_path / "data" / "observation.memmap")
        source = _FLOOR_SOURCE[0]
        rows = os.path.getsize(source) // (17 * 4)
        out_dir = _tempdir("bench_floor_")
        _, width, rows_fn = FUNCTIONS[function]()

        def compute(out_file: Path, start: int, stop: int) -> None:
            observation = torch.from_file(str(source), shared=False, size=rows * 17)
            observation = observation.view(rows, 17)
            out = torch.from_file(str(out_file), shared=True, size=rows * width)
            out = out.view(rows, width) if width > 1 else out
            for first in range(start, stop, 65536):  # bounded temporaries, like ours
                last = min(first + 65536, stop)
                out[first:last] = rows_fn(observation[first:last])

        def call():
            out_file = out_dir / "out.memmap"
            out_file.unlink(missing_ok=True)
            with open(out_file, "wb") as file:
                file.truncate(rows * width * 4)
            if workers == 1:
                compute(out_file, 0, rows)
                return
            half = rows // 2
            ready, done = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    compute(out_file, half, rows)
                    os.write(done, b"1")
                finally:
                    os._exit(0)
            compute(out_file, 0, half)
            os.close(done)
            if os.read(ready, 1) != b"1":
                raise RuntimeError("the floor's child process failed")
            os.close(ready)
            threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()

        return call

    return setup


WORKLOADS = [
    Workload(
        f"D4RL file -> TED memmaps, {STEPS} transitions (MB of the file)",
        setups={"rl_stack": convert_ours, "torchrl": convert_torchrl, "floor": convert_floor},
        items=max(1, round(MEGABYTES)),
        unit="MB",
    ),
    Workload(
        f"dataset.sample({BATCH}), D4RL {STEPS}",
        setups={"rl_stack": sample_dataset, "torchrl": sample_dataset},
        items=BATCH,
        unit="samples",
    ),
    Workload(
        f"TensorDictReplayBuffer.sample({BATCH}) on the dataset's storage, D4RL {STEPS}",
        setups={"rl_stack": sample_buffer_same_storage},
        items=BATCH,
        unit="samples",
    ),
    *(
        Workload(
            f"dataset.preprocess({function}), {STEPS} rows, num_workers={workers}",
            setups={
                "rl_stack": _preprocess(workers, function),
                "floor": _preprocess_floor(workers, function),
            },
            items=STEPS,
            unit="rows",
        )
        for function in FUNCTIONS
        for workers in (1, 2)
    ),
]

if __name__ == "__main__":
    run(WORKLOADS)
