"""``SerialEnv``: a batch of envs run one after the other in this process."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase

from rl_batched_envs._batched import BatchedEnvBase
from rl_batched_envs._buffered import SerialFill
from rl_batched_envs._env_group import EnvGroup, build_envs
from rl_batched_envs._stacking import EnvFactory
from rl_envs_core import EnvMetaData


class SerialEnv(BatchedEnvBase):
    """Creates a series of environments in the same process.

    The batched env has batch size ``[num_workers, *sub_env.batch_size]`` and the
    sub-envs' specs stacked along a new first dim. It enjoys the exact API of
    :class:`ParallelEnv` and, with the same seeds, returns the same data. Batched
    environments allow the user to query an arbitrary method / attribute of the
    environment running remotely: ``env.some_attr`` returns one value per sub-env
    and ``env.some_method(*args)`` calls it on every sub-env.

    Partial steps (a ``"_step"`` mask) run only the selected sub-envs; partial
    resets (``"_reset"`` masks shaped like the ``"done"`` entry of their level)
    reset only the selected ones.

    Args:
        num_workers (int): the number of sub-envs.
        create_env_fn (callable or list of callables): builds a sub-env; a list
            (one per sub-env) builds heterogeneous batches. Sub-envs whose specs
            differ are stacked lazily and their data comes back as lazy stacks.
        create_env_kwargs (dict or list of dicts, optional): kwargs of
            ``create_env_fn``, one dict for all or one per sub-env. Defaults to ``None``.

    Keyword Args:
        device (torch.device, optional): the device of the batched env's data.
            Defaults to ``None`` (the sub-envs' device).
        use_buffers (bool, optional): move data through preallocated buffers.
            Defaults to ``None`` (whenever the specs are static and stackable). Sub-envs with
            non-tensor entries (strings...) move their data pickled, even with
            ``True``: tensor buffers cannot hold those values.
        num_threads (int, optional): torch threads of this process. Defaults to
            ``None`` (unchanged).
        mp_start_method (str, optional): accepted so that code written for
            :class:`ParallelEnv` runs unchanged; a serial env starts no process and
            ignores it. Defaults to ``None``.
        share_individual_td (bool, optional): ``True`` returns the data as a lazy
            stack of one tensordict per sub-env (``use_buffers`` must not be
            ``True``); ``False`` requires sub-envs whose data stacks densely.
            Defaults to ``None`` (lazy only for heterogeneous sub-envs).
        serial_for_single (bool, optional): accepted so that code written for
            :class:`ParallelEnv` runs unchanged; no effect here. Defaults to ``False``.

    Raises:
        ValueError: ``num_workers`` is not a positive int, a list argument has the
            wrong length, or the sub-envs have different batch sizes.
        TypeError: ``create_env_fn`` is not callable or does not return an env.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = SerialEnv(3, CountingEnv, {"max_steps": 4})
        >>> env.batch_size, env.action_spec.shape
        (torch.Size([3]), torch.Size([3, 1]))
        >>> env.max_steps
        [4, 4, 4]
        >>> env.rollout(10)["next", "observation"].shape
        torch.Size([3, 4, 1])
        >>> env.close()
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        *,
        device: torch.device | str | None = None,
        use_buffers: bool | None = None,
        num_threads: int | None = None,
        mp_start_method: str | None = None,
        share_individual_td: bool | None = None,
        serial_for_single: bool = False,
    ) -> None:
        del mp_start_method, serial_for_single  # no process to start
        super().__init__(
            num_workers,
            create_env_fn,
            create_env_kwargs,
            device=device,
            use_buffers=use_buffers,
            num_threads=num_threads,
            share_individual_td=share_individual_td,
        )

    def _launch(self) -> list[EnvMetaData]:
        n = self._num_workers
        group = EnvGroup(build_envs(self._fns, self._kwargs), offset=0, owner="SerialEnv")
        state = self.__dict__
        state["_groups"] = [group]
        state["_spans"] = [(0, n)]
        state["_worker_of"] = [0] * n
        return group.metadata()

    def _call_each(self, name: str, args: dict[int, tuple]) -> dict:
        groups = self._groups
        return {w: getattr(groups[w], name)(*a) for w, a in args.items()}

    def _attach(self, buffers: tuple) -> None:
        self._groups[0].attach(*buffers)

    def _step_all(self) -> None:
        self._groups[0].step(None)

    def _step_reset_all(self) -> None:
        self._groups[0].step_and_reset_done(None)

    def buffered_stepper(self, batch: TensorDictBase) -> SerialFill | None:
        """Step in place (``rl_envs_core.extension.SupportsBufferedSteps``), or decline.

        Each sub-env's own stepper fills its rows of ``batch``; ``None`` unless the
        env uses buffers and every sub-env is unbatched and has a stepper that accepts.

        Examples:
            >>> from rl_envs_core.extension import BufferedRollout
            >>> from rl_envs_core.testing import BufferedCountingEnv, CountingEnv
            >>> env = SerialEnv(2, BufferedCountingEnv)
            >>> _ = env.rollout(1)  # the sub-envs' first step goes through their checks
            >>> batch = BufferedRollout.of(env).allocate(3)
            >>> env.buffered_stepper(batch) is not None
            True
            >>> other = SerialEnv(2, CountingEnv)
            >>> _ = other.rollout(1)
            >>> other.buffered_stepper(batch) is None
            True
        """
        self._ensure_started()
        if not self._use_buffers:
            return None
        group = self._groups[0]
        group.attach_fill(batch)
        return SerialFill(group) if group.prepare_fill() else None

    def _shutdown(self) -> None:
        for group in self.__dict__.get("_groups", ()):
            group.close()
        self.__dict__["_groups"] = []
