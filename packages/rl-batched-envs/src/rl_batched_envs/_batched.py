"""``BatchedEnvBase``: what ``SerialEnv`` and ``ParallelEnv`` share.

Argument handling, specs stacked from the sub-envs' metadata (``_stacking``), the
buffers that carry inputs and outputs, partial steps/resets, seeding, attribute
forwarding and indexing (``env[i]``, a view made in ``_indexed``).
Subclasses provide the transport: :meth:`_launch` (build the envs and return their
metadata), :meth:`_call` (run an ``EnvGroup`` method in some workers) and
:meth:`_step_all` / :meth:`_step_reset_all` (the hot paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rl_batched_envs._env_group import flat_entries
from rl_batched_envs._indexed import view_class
from rl_batched_envs._selection import active_envs, normalize_index, reset_targets
from rl_batched_envs._stacking import (
    EnvFactory,
    as_list,
    check_sub_batch,
    clone_entries,
    make_buffers,
    non_tensor_keys,
    stack_specs,
)
from rl_envs_core import EnvBase, EnvMetaData
from rl_envs_core.extension import (
    advance_root,
    install_stacked_specs,
    key_layout,
)
from rl_specs import Composite


def _on_env_device(td: TensorDictBase, device: torch.device | None) -> TensorDictBase:
    """``td`` (and its non-tensor leaves) on ``device``, or on none when it is ``None``."""
    return td.to(device) if device is not None else td.copy().clear_device_()


class BatchedEnvBase(EnvBase):
    """Common base of batched envs; see :class:`SerialEnv` for the arguments."""

    def __init__(
        self,
        num_workers: int,
        create_env_fn: EnvFactory | Sequence[EnvFactory],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        *,
        device: torch.device | str | None = None,
        use_buffers: bool | None = None,
        num_threads: int | None = None,
        share_individual_td: bool | None = None,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(
                f"{type(self).__name__} expected num_workers to be a positive int, got "
                f"{num_workers!r}."
            )
        fns = as_list(create_env_fn, num_workers, "create_env_fn", ())
        for fn in fns:
            if not callable(fn):
                raise TypeError(
                    f"create_env_fn must be a callable returning an env, got "
                    f"{type(fn).__name__}. Pass the env class or a function that builds it."
                )
        kwargs = as_list(create_env_kwargs or {}, num_workers, "create_env_kwargs", dict)
        self.__dict__["_fns"] = fns
        self.__dict__["_kwargs"] = [dict(k) for k in kwargs]
        self.__dict__["_num_workers"] = num_workers
        self.__dict__["_use_buffers_arg"] = use_buffers
        self.__dict__["_share_individual_td"] = share_individual_td
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        metas = self._start_and_collect()
        try:
            sub_batch = check_sub_batch(type(self).__name__, metas)
            if device is None:
                device = metas[0].device
            super().__init__(device=device, batch_size=torch.Size([num_workers, *sub_batch]))
            self._set_specs(metas)
        except BaseException:
            self.close(raise_if_closed=False)
            raise

    # ------------------------------------------------------------------ subclass hooks
    def _launch(self) -> list[EnvMetaData]:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _launch().")

    def _call_each(self, name: str, args: dict[int, tuple]) -> dict:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _call_each().")

    def _attach(self, buffers: tuple) -> None:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _attach().")

    def _step_all(self) -> None:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _step_all().")

    def _step_reset_all(self) -> None:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _step_reset_all().")

    def _shutdown(self) -> None:
        """Abstract backend hook, implemented by each subclass."""
        raise NotImplementedError(f"{type(self).__name__} must implement _shutdown().")

    # ------------------------------------------------------------------ start-up
    @property
    def num_workers(self) -> int:
        """The number of sub-envs (the leading batch dim)."""
        return self._num_workers

    def _start_and_collect(self) -> list[EnvMetaData]:
        metas = self._launch()
        self.__dict__["_running"] = True
        self.__dict__["_meta_data"] = metas
        return metas

    def _set_specs(self, metas: list[EnvMetaData]) -> None:
        specs, lazy = stack_specs(metas)
        install_stacked_specs(self, specs, lazy=lazy)
        dynamic = key_layout(self)["dynamic"]
        carried = non_tensor_keys(specs)
        use, individual = self._use_buffers_arg, self._share_individual_td
        name = type(self).__name__
        if individual is False and lazy:
            raise ValueError(
                f"{name}(share_individual_td=False) needs sub-envs whose data stacks into "
                f"one tensordict, but their specs differ. Pass share_individual_td=None or True."
            )
        if individual and use:
            raise ValueError(
                f"{name}(share_individual_td=True) returns a lazy stack of one tensordict per "
                f"sub-env, which use_buffers=True (one preallocated tensordict) cannot give. "
                f"Pass use_buffers=None or False."
            )
        if use is None or (use and carried):
            # tensor buffers cannot hold strings: with non-tensor entries the data
            # moves pickled, so that their values pass through (use_buffers=True too)
            use = not (lazy or dynamic or individual or carried)
        elif use and (lazy or dynamic):
            raise ValueError(
                f"{name}(use_buffers=True) needs static, stackable specs, but "
                f"the sub-envs have {'heterogeneous' if lazy else 'dynamic (-1)'} specs. Pass "
                f"use_buffers=None or False."
            )
        self.__dict__["_use_buffers"] = use
        self.__dict__["_lazy"] = bool(lazy or dynamic or individual)
        if use:
            self._make_buffers(specs)
        else:
            # the sub-envs' example data, on their device as their outputs will be
            examples = [_on_env_device(m.tensordict, m.device) for m in metas]
            self.__dict__["_last_next"] = [td.get("next") for td in examples]
            self.__dict__["_last_root"] = [td.exclude("next") for td in examples]

    @property
    def share_individual_td(self) -> bool:
        """Whether the data comes back as a lazy stack of one tensordict per sub-env."""
        return self._lazy

    @property
    def create_env_fn(self) -> list[EnvFactory]:
        """The factory of each sub-env."""
        return list(self._fns)

    @property
    def create_env_kwargs(self) -> list[dict]:
        """The kwargs each sub-env is built with (see :meth:`update_kwargs`)."""
        return self._kwargs

    def _make_buffers(self, specs: Composite) -> None:
        layout, in_buf, next_buf, root_buf = make_buffers(specs, key_layout(self), self.batch_size)
        buffers = (layout, *(self._share(b.cpu()) for b in (in_buf, next_buf, root_buf)))
        self._attach(buffers)
        _, in_buf, next_buf, root_buf = buffers
        state = self.__dict__
        state["_in_pairs"] = [(k, in_buf.get(k)) for k in layout.in_keys]
        state["_previous_pairs"] = [(k, root_buf.get(k)) for k in layout.previous_keys]
        state["_root_stale"] = False
        state["_mask_buf"] = in_buf
        state["_next_buf"] = next_buf
        state["_root_buf"] = root_buf
        state["_entries"] = {id(b): flat_entries(b) for b in (next_buf, root_buf)}
        state["_layout"] = layout

    def _share(self, buf: TensorDictBase) -> TensorDictBase:
        return buf

    def _ensure_started(self) -> None:
        if not self._running:
            self.start()

    def start(self) -> None:
        """Start the sub-envs (done at construction; again after ``close()``)."""
        if self._running:
            return
        self._set_specs(self._start_and_collect())
        self.is_closed = False
        self.__dict__["_closed_by_call"] = False

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the sub-envs and stop the workers; the env restarts on next use.

        Args:
            raise_if_closed (bool, optional): raise if ``close()`` was already called
                (and the env not used since). Defaults to ``True``.

        Raises:
            RuntimeError: on a repeated ``close()`` with ``raise_if_closed`` set.
        """
        if raise_if_closed and self.__dict__.get("_closed_by_call", False):
            raise RuntimeError(
                f"{type(self).__name__}.close() was called on an env that is already "
                f"closed. Pass raise_if_closed=False to make a repeated close a no-op."
            )
        if self.__dict__.get("_running", False):
            self._shutdown()
        self.__dict__["_running"] = False
        self.__dict__["is_closed"] = True
        self.__dict__["_closed_by_call"] = True

    def __enter__(self) -> BatchedEnvBase:
        self._ensure_started()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(raise_if_closed=False)

    def update_kwargs(self, kwargs: dict | Sequence[dict]) -> None:
        """Update the kwargs given to each env factory (a dict for all or one per env).

        Running sub-envs are closed; the env restarts with the new kwargs on next use.
        """
        new = as_list(kwargs, self.num_workers, "kwargs", dict)
        for old, extra in zip(self._kwargs, new):
            old.update(extra)
        if self._running:
            self.close(raise_if_closed=False)

    def configure_parallel(
        self,
        *,
        use_buffers: bool | None = None,
        mp_start_method: str | None = None,
        num_threads: int | None = None,
        num_sub_threads: int | None = None,
        shutdown_timeout: float | None = None,
    ) -> BatchedEnvBase:
        """Change how the sub-envs run, while the env is not running.

        The sub-envs start when the env is built, so close it first; the new
        settings apply when it restarts (on next use). ``None`` leaves a setting
        unchanged; the process settings have no effect on a :class:`SerialEnv`.

        Keyword Args:
            use_buffers (bool, optional): see the constructor.
            mp_start_method (str, optional): see :class:`ParallelEnv`.
            num_threads (int, optional): torch threads of this process (set now).
            num_sub_threads (int, optional): torch threads of each worker process.
            shutdown_timeout (float, optional): see :class:`ParallelEnv`.

        Returns:
            the env itself.

        Raises:
            RuntimeError: the env is running (it has started and was not closed).

        Examples:
            >>> from rl_batched_envs import SerialEnv
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = SerialEnv(2, CountingEnv)
            >>> env.close()
            >>> env.configure_parallel(use_buffers=False).rollout(2).batch_size
            torch.Size([2, 2])
            >>> env.close()
        """
        if self._running:
            raise RuntimeError(
                f"{type(self).__name__}.configure_parallel() cannot be called after the "
                f"environment has started (its sub-envs start when it is built). Call "
                f"env.close() first; the settings apply when it restarts."
            )
        if use_buffers is not None:
            self.__dict__["_use_buffers_arg"] = use_buffers
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self._configure_processes(mp_start_method, num_sub_threads, shutdown_timeout)
        return self

    def _configure_processes(
        self,
        mp_start_method: str | None,
        num_sub_threads: int | None,
        shutdown_timeout: float | None,
    ) -> None:
        """Process settings of :meth:`configure_parallel` (none for an in-process env)."""

    # ------------------------------------------------------------------ routing
    def _route(self, envs: list[int] | None) -> dict[int, list[int] | None]:
        """Global env indices -> {worker: local indices or None (all)}."""
        spans = self._spans
        if envs is None:
            return {w: None for w in range(len(spans))}
        routed: dict[int, list[int] | None] = {}
        for i in envs:
            w = self._worker_of[i]
            routed.setdefault(w, []).append(i - spans[w][0])
        return routed

    def _output(self, buf: TensorDictBase) -> TensorDictBase:
        """A copy of ``buf`` (never a view: the buffers are overwritten at the next step)
        on the env's device."""
        device = self.device
        if device is None or device == buf.device:
            return clone_entries(buf, self._entries[id(buf)])
        if device.type == buf.device.type:  # another ordinal of the same memory: copy
            return clone_entries(buf, self._entries[id(buf)]).to(device)
        out = buf.to(device)
        return out.unlock_() if out.is_locked else out

    def _stack(self, tds: list[TensorDictBase]) -> TensorDictBase:
        if self._lazy:
            out = LazyStackedTensorDict.lazy_stack(tds, 0)
        else:
            out = torch.stack(tds, 0)
        return out.to(self.device) if self.device is not None else out

    def _pickled(
        self, name: str, envs: list[int] | None, inputs: list[TensorDictBase | None], extra: tuple
    ) -> list:
        envs = list(range(self.num_workers)) if envs is None else envs
        by_env = dict(zip(envs, inputs))
        args = {}
        for w, local in self._route(envs).items():
            start = self._spans[w][0]
            args[w] = (local, [by_env[start + j] for j in local], *extra)
        results = self._call_each(name, args)
        flat = {}
        for w, local in self._route(envs).items():
            start = self._spans[w][0]
            for j, res in zip(local, results[w]):
                flat[start + j] = res
        return flat

    # ------------------------------------------------------------------ step / reset
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._ensure_started()
        mask = tensordict.get("_step", None)
        envs = active_envs(mask, self.num_workers)
        if not self._use_buffers:
            inputs = [tensordict[i] for i in (envs or range(self.num_workers))]
            for i, nxt in self._pickled("step", envs, inputs, ()).items():
                self._last_next[i] = nxt
            return self._stack(self._last_next)
        for key, buf in self._in_pairs:
            value = tensordict.get(key, None)
            if value is not None:
                buf.copy_(value)
        self._take_previous(tensordict)
        if envs is None:
            self._step_all()
        else:
            partial = len(self.batch_size) > 1
            if partial:
                self._mask_buf.get("_step").copy_(mask.reshape(self.batch_size))
            route = self._route(envs)
            self._call_each("step", {w: (local, None, partial) for w, local in route.items()})
        return self._output(self._next_buf)

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Step every sub-env and reset the done ones inside the workers.

        Returns the step data (with ``"next"``) and the input of the next step.
        """
        if not self._use_buffers or "_step" in tensordict.keys():
            return super().step_and_maybe_reset(tensordict)
        self._ensure_started()
        for key, buf in self._in_pairs:
            value = tensordict.get(key, None)
            if value is not None:
                buf.copy_(value)
        if self._root_stale:  # a step() came last: the workers' root data is not current
            self._take_previous(tensordict)
            self.__dict__["_root_stale"] = False
        self._step_reset_all()
        tensordict.set("next", self._output(self._next_buf))
        root = advance_root(self, tensordict)
        root.update(self._output(self._root_buf))
        return tensordict, root

    def _take_previous(self, tensordict: TensorDictBase) -> None:
        """Copy the observations of ``tensordict`` (the previous step's data) into the
        root buffer, which the sub-envs' ``_step`` reads them from.

        ``step_and_maybe_reset`` keeps the root buffer current inside the workers, so
        only ``step()`` needs this; an entry a transform reshaped is left out.
        """
        for key, buf in self._previous_pairs:
            value = tensordict.get(key, None)
            if isinstance(value, torch.Tensor) and value.shape == buf.shape:
                buf.copy_(value)
        self._mark_root_stale()

    def _mark_root_stale(self) -> None:
        """The root buffer holds data a ``step()`` wrote, not the workers' current root."""
        self.__dict__["_root_stale"] = True

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        self._ensure_started()
        found, envs = reset_targets(tensordict, key_layout(self)["reset_keys"], self.num_workers)
        if not self._use_buffers:
            inputs = []
            for i in envs if envs is not None else range(self.num_workers):
                inputs.append(tensordict[i].select(*found) if found else None)
            for i, out in self._pickled("reset", envs, inputs, ((), kwargs)).items():
                self._last_root[i] = out
            # new containers each call: the caller may write into this output, and a
            # rollout keeps the tensordicts of earlier calls (a lazy stack holds them)
            return self._stack([td.copy() for td in self._last_root])
        for key in found:
            buf, mask = self._mask_buf.get(key), tensordict.get(key)
            if mask.shape != buf.shape:
                if mask.numel() != buf.numel():
                    raise ValueError(
                        f"The {key!r} mask must have the shape of the matching done entry, "
                        f"{tuple(buf.shape)}; got {tuple(mask.shape)}. Build it from the "
                        f"done flags, e.g. td[{key!r}] = td['done'].clone()."
                    )
                mask = mask.reshape(buf.shape)
            buf.copy_(mask)
        if envs is None or envs:
            route = self._route(envs)
            self._call_each("reset", {w: (j, None, found, kwargs) for w, j in route.items()})
        out = self._output(self._root_buf)
        if envs is not None:
            self._keep_previous(out, tensordict, envs)
        else:
            self.__dict__["_root_stale"] = False
        return out

    def _keep_previous(self, out: TensorDictBase, previous: TensorDictBase, envs: list) -> None:
        """Where a sub-env (of ``out``'s first dim) was not reset, its data is the
        previous data (when given)."""
        keep = torch.ones(out.batch_size[0], dtype=torch.bool)
        keep[envs] = False
        for key in self._layout.root_keys:
            old, new = previous.get(key, None), out.get(key)
            if isinstance(old, torch.Tensor) and old.shape == new.shape:
                mask = keep.to(new.device).reshape(-1, *[1] * (new.ndim - 1))
                out.set(key, torch.where(mask, old.to(new.device), new))

    # ------------------------------------------------------------------ seeds, attributes
    def _set_seed(self, seed: int | None) -> None:
        self._seed_chain(seed, False)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the sub-envs in turn, each with the seed the previous one returned.

        Returns the seed following the last sub-env's (to seed other envs with).
        """
        return self._seed_chain(seed, static_seed)

    def _seed_chain(
        self, seed: int | None, static_seed: bool, envs: list[int] | None = None
    ) -> int | None:
        """Seed the sub-envs (``envs``, in order; ``None``: all) in turn, each with the
        seed the previous one returned."""
        self._ensure_started()
        if envs is None:
            for w in range(len(self._spans)):
                seed = self._call_each("set_seed", {w: (seed, static_seed)})[w]
            return seed
        for i in envs:
            w = self._worker_of[i]
            local = [i - self._spans[w][0]]
            seed = self._call_each("set_seed", {w: (seed, static_seed, local)})[w]
        return seed

    def _forward(self, name: str, envs: list[int] | None = None) -> Any:  # Any: sub-env values
        """Sub-env attribute ``name`` (one value per env of ``envs``; ``None``: all), or,
        for a method, a function calling it on each of them."""
        self._ensure_started()
        route = self._route(envs)
        order = list(range(self.num_workers)) if envs is None else envs
        spans = self._spans

        def gather(results: dict) -> list:
            by_env = {}
            for w, local in route.items():
                start = spans[w][0]
                local = range(spans[w][1] - start) if local is None else local
                for j, value in zip(local, results[w]):
                    by_env[start + j] = value
            return [by_env[i] for i in order]

        first = next(iter(route))
        if self._call_each("is_method", {first: (name,)})[first]:

            def method(*args: Any, **kwargs: Any) -> list:  # Any: forwarded arguments
                calls = {w: (name, args, kwargs, local) for w, local in route.items()}
                return gather(self._call_each("call", calls))

            return method
        return gather(self._call_each("get_attr", {w: (name, local) for w, local in route.items()}))

    # ------------------------------------------------------------------ indexing
    def _specs_of(self, envs: list[int]) -> tuple[Composite, bool]:
        """The stacked specs of the sub-envs ``envs`` and whether the stack is lazy."""
        return stack_specs([self._meta_data[i] for i in envs])

    def __getitem__(self, item: Any) -> BatchedEnvBase:  # Any: int, slice, index sequence
        """A live view on the sub-envs ``item`` selects (an env of the same class).

        Stepping or resetting the view runs those sub-envs of this env (the data of
        the others is untouched); attributes and methods are forwarded to them.
        Closing the view leaves this env running; once this env is closed the view
        raises. Boolean masks are not supported.

        Raises:
            NotImplementedError: ``item`` is a boolean mask.
            IndexError: an index is out of range or selects no env.

        Examples:
            >>> from rl_batched_envs import SerialEnv
            >>> from rl_envs_core.testing import CountingEnv
            >>> env = SerialEnv(4, CountingEnv)
            >>> view = env[1:3]
            >>> type(view).__name__, view.batch_size
            ('SerialEnv', torch.Size([2]))
            >>> _ = env.reset()
            >>> _ = view.rand_step()
            >>> [int(c) for c in env.count]
            [0, 1, 1, 0]
            >>> env.close()
        """
        self._ensure_started()
        return view_class(type(self))(self, normalize_index(item, self.num_workers))

    def __setitem__(self, item: Any, source: Any) -> None:  # Any: refused whatever it is
        """Not supported: a running sub-env cannot be replaced by (a snapshot of) another.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            f"{type(self).__name__}[{item!r}] = {type(source).__name__}: replacing sub-envs "
            f"of a running batched env (snapshot writeback of another env's state) is not "
            f"supported. Build a new batched env with the envs you want."
        )

    def __getattr__(self, name: str) -> Any:  # Any: forwarded attribute
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "_output_spec" not in self.__dict__:
                raise
        try:
            return self._forward(name)
        except AttributeError as err:
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r} and its sub-envs neither: {err}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"batch_size={tuple(self.batch_size)}, device={self.device})"
        )
