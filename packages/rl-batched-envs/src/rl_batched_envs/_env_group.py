"""``EnvGroup``: the envs one worker (or a ``SerialEnv``) runs, and its buffer I/O.

A group owns envs ``offset .. offset + len(envs) - 1`` of a batched env. With
buffers attached (static specs) it reads inputs from and writes outputs into
preallocated tensordicts indexed by env; without buffers (dynamic or
heterogeneous specs) it takes input tensordicts and returns output tensordicts.
The same code runs in a ``SerialEnv`` and in every ``ParallelEnv`` worker, so both
produce the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_batched_envs._buffered import GroupFill
from rl_envs_core import EnvBase, EnvMetaData
from rl_envs_core.extension import entries, get_entry, key_layout, new_unchecked, next_of

Pairs = list[tuple[NestedKey, torch.Tensor]]


def key_str(key: NestedKey) -> str:
    """A readable form of a (possibly nested) key."""
    return repr(key if isinstance(key, str) or len(key) > 1 else key[0])


class BufferLayout:
    """Which keys go through which buffer (all key lists are fixed at start-up).

    Args:
        in_keys: root inputs (actions and states).
        mask_keys: ``"_step"`` and one ``"_reset"`` per done level.
        next_keys: step outputs (observations, rewards, dones).
        root_keys: reset outputs (observations, dones) and states.
        optional_keys: root keys an env may leave out (states).
        reset_levels: ``("_reset" key, done key)`` of each done level: where an env
            is done, ``step_and_maybe_reset`` resets it with the done flags as mask.
        previous_keys: root outputs (observations) handed to an env's ``_step`` with
            its inputs, from the root buffer: the previous step's data, as an env that
            reads its last observation expects.
    """

    def __init__(
        self,
        *,
        in_keys: Sequence[NestedKey],
        mask_keys: Sequence[NestedKey],
        next_keys: Sequence[NestedKey],
        root_keys: Sequence[NestedKey],
        optional_keys: Sequence[NestedKey],
        reset_levels: Sequence[tuple[NestedKey, NestedKey]] = (),
        previous_keys: Sequence[NestedKey] = (),
    ) -> None:
        self.in_keys = list(in_keys)
        self.mask_keys = list(mask_keys)
        self.next_keys = list(next_keys)
        self.root_keys = list(root_keys)
        self.optional_keys = set(optional_keys)
        self.reset_levels = list(reset_levels)
        self.previous_keys = list(previous_keys)


class EnvGroup:
    """The envs of one worker and the code that drives them.

    Args:
        envs: the envs, in batch order.
        offset: the batch index of the first env.
        owner: the batched env class name (for error messages).
    """

    def __init__(self, envs: Sequence[EnvBase], *, offset: int, owner: str) -> None:
        self.envs = list(envs)
        # each env's documented next_of, bound once (one call less per sub-env step)
        self.next_of = [env.next_of for env in self.envs]
        self.offset = offset
        self.owner = owner
        self.buffered = False

    # ------------------------------------------------------------------ buffers
    def attach(
        self,
        layout: BufferLayout,
        in_buf: TensorDictBase,
        next_buf: TensorDictBase,
        root_buf: TensorDictBase,
    ) -> None:
        """Index the full-batch buffers once; later calls only copy tensors."""
        self.layout = layout
        self.in_td, self.masks, self.next_pairs, self.root_pairs = [], [], [], []
        self.next_td, self.root_td, self.previous = [], [], []
        for j in range(len(self.envs)):
            i = self.offset + j
            view = in_buf[i]
            self.in_td.append(view.select(*layout.in_keys))
            self.masks.append(view.select(*layout.mask_keys))
            nxt, root = next_buf[i], root_buf[i]
            self.next_td.append(nxt)
            self.root_td.append(root.select(*layout.root_keys))
            self.previous.append(root.select(*layout.previous_keys))
            self.next_pairs.append([(k, nxt.get(k)) for k in layout.next_keys])
            self.root_pairs.append([(k, root.get(k)) for k in layout.root_keys])
        # the group's slice of the buffers, for the batched copies of step_and_maybe_reset
        rows = slice(self.offset, self.offset + len(self.envs))
        in_rows, next_rows, root_rows = in_buf[rows], next_buf[rows], root_buf[rows]
        carried = [k for k in layout.root_keys if k in set(layout.next_keys)]
        self.carry = [(next_rows.get(k), root_rows.get(k)) for k in carried]
        self.carry += [
            (in_rows.get(k), root_rows.get(k))
            for k in layout.root_keys
            if k not in set(carried) and k in set(layout.in_keys)
        ]
        self.carry_src = [src for src, _ in self.carry]
        self.carry_dst = [dst for _, dst in self.carry]
        self.done_rows = [next_rows.get(done) for _, done in layout.reset_levels]
        # each env's input entries with the previous data, when all are tensors and
        # unnamed, with the batch size and device of the tensordict made of them (read
        # here once: they are properties of the views)
        self.in_src = []
        for td, previous in zip(self.in_td, self.previous):
            src, prev = flat_entries(td), flat_entries(previous)
            fits = src is not None and prev is not None
            self.in_src.append((dict(prev + src), td.batch_size, td.device) if fits else None)
        # the group's rows of each step output, filled by one stack per key
        self.next_rows = [next_rows.get(k) for k in layout.next_keys]
        self.next_shapes = [rows.shape[1:] for rows in self.next_rows]
        self.buffered = True

    def _write(self, j: int, pairs: Pairs, data: TensorDictBase, what: str) -> None:
        optional = self.layout.optional_keys
        for key, dst in pairs:
            src = get_entry(data, key)
            if src is None:
                if key in optional:
                    continue
                raise KeyError(
                    f"{self.owner}: env {self.offset + j} returned no entry {key_str(key)} from "
                    f"{what}, but its specs declare it (returned: "
                    f"{sorted(map(str, data.keys(True, True)))}). Run check_env_specs(env) on "
                    f"the sub-env and return every entry its specs declare."
                )
            if src.shape != dst.shape:
                raise ValueError(
                    f"{self.owner}: env {self.offset + j} returned the entry {key_str(key)} "
                    f"with shape {tuple(src.shape)} from {what}, but its specs declare shape "
                    f"{tuple(dst.shape)}. Run check_env_specs(env) on the sub-env and fix its "
                    f"specs or its output."
                )
            dst.copy_(src)

    def _blame(self, exc: Exception, j: int, what: str) -> Exception:
        """Note on ``exc`` which env of the batch raised it."""
        exc.add_note(f"Raised by {self.owner} env {self.offset + j} during {what}.")
        return exc.with_traceback(exc.__traceback__)

    def _input(self, j: int, partial: bool) -> TensorDictBase:
        """A fresh tensordict over env ``j``'s input views and previous data (an env
        may add or replace entries of its input: the views themselves must stay
        untouched), with the ``"_step"`` mask of a partial step."""
        src = self.in_src[j]
        if src is None:
            td = self.previous[j].clone(recurse=False).update(self.in_td[j].copy())
        else:  # what copy() returns; the entries were validated when the buffers were built
            views, batch_size, device = src  # a copy of the dict: the env may edit its input
            td = new_unchecked(views.copy(), batch_size, device, nested=False)  # all tensors
        if partial:
            td.set("_step", self.masks[j].get("_step"))
        return td

    def _active(self, active: Sequence[int] | None) -> Sequence[int]:
        return range(len(self.envs)) if active is None else active

    # ------------------------------------------------------------------ commands
    def step(
        self,
        active: Sequence[int] | None,
        inputs: Sequence[TensorDictBase] | None = None,
        partial: bool = False,
    ) -> list[TensorDictBase] | None:
        """Step the ``active`` envs (local indices; ``None``: all).

        Every env is stepped through ``next_of`` (what ``env.step`` writes under
        ``"next"``: input checks, partial steps, done completion, auto-reset). Without
        buffers the outputs are returned; with buffers they are written into the
        group's rows: when every env steps, with one ``torch.stack(..., out=rows)``
        per key while every env returns every key with the declared shape (checked
        before stepping the next env, as ``_write`` does); otherwise, and from the
        first env that does not, through ``_write`` (its errors, optional keys, dtype
        casts).
        """
        envs = self.envs
        if not self.buffered:
            return [next_of(envs[j], td) for j, td in zip(self._active(active), inputs)]
        keys, shapes, make_input = self.layout.next_keys, self.next_shapes, self._input
        columns: list[list[torch.Tensor]] | None = None
        if active is None and not partial:
            columns = [[] for _ in keys]
        outs = []
        for j in self._active(active):
            try:
                nxt = self.next_of[j](make_input(j, partial))
                outs.append(nxt)
                if columns is not None and not _gather(nxt, keys, shapes, columns):
                    columns = None
                    for i, prev in enumerate(outs):  # the earlier ones passed the check
                        self._write(i, self.next_pairs[i], prev, "step")
                elif columns is None:
                    self._write(j, self.next_pairs[j], nxt, "step")
            except Exception as exc:
                raise self._blame(exc, j, "step") from None
        if columns is None:
            return None
        try:
            for column, dst in zip(columns, self.next_rows):
                torch.stack(column, out=dst)
        except (RuntimeError, TypeError):  # e.g. outputs on another device than the buffers
            for j, nxt in enumerate(outs):
                try:
                    self._write(j, self.next_pairs[j], nxt, "step")
                except Exception as exc:
                    raise self._blame(exc, j, "step") from None
        return None

    def step_full(
        self, active: Sequence[int] | None, inputs: Sequence[TensorDictBase]
    ) -> list[TensorDictBase]:
        """Step the ``active`` envs on ``inputs``; return the whole step data."""
        return [self.envs[j].step(td) for j, td in zip(self._active(active), inputs)]

    def step_and_reset_done(
        self, active: Sequence[int] | None, inputs: Sequence[TensorDictBase] | None = None
    ) -> list[tuple[TensorDictBase, TensorDictBase]] | None:
        """Step the envs and reset the done ones, all inside this group (the worker
        side of ``BatchedEnvBase.step_and_maybe_reset``)."""
        envs = self.envs
        if not self.buffered:
            results = []
            for j, td in zip(self._active(active), inputs):
                out, root = envs[j].step_and_maybe_reset(td)
                results.append((out.get("next"), root))
            return results
        self.step(active)
        if self.carry:
            torch._foreach_copy_(self.carry_dst, self.carry_src)  # one call for every key
        if not any(bool(rows.any()) for rows in self.done_rows):  # the common case
            return None
        done = None
        for rows in self.done_rows:
            flags = rows.reshape(len(envs), -1).any(-1)
            done = flags if done is None else done | flags
        levels = self.layout.reset_levels
        for j in done.nonzero().squeeze(-1).tolist():
            td = self.root_td[j].copy()
            nxt = self.next_td[j]
            for reset_key, done_key in levels:
                td.set(reset_key, nxt.get(done_key).clone())
            try:
                self._write(j, self.root_pairs[j], envs[j].reset(td), "reset")
            except Exception as exc:
                raise self._blame(exc, j, "step_and_maybe_reset") from None
        return None

    def reset(
        self,
        active: Sequence[int] | None,
        inputs: Sequence[TensorDictBase | None] | None = None,
        reset_keys: Sequence[NestedKey] = (),
        kwargs: dict | None = None,
    ) -> list[TensorDictBase] | None:
        """Reset the ``active`` envs; ``reset_keys`` name the masks to pass on."""
        envs, kwargs = self.envs, kwargs or {}
        if not self.buffered:
            return [envs[j].reset(td, **kwargs) for j, td in zip(self._active(active), inputs)]
        for j in self._active(active):
            td = None
            if reset_keys:
                masks = self.masks[j]
                td = TensorDict({k: masks.get(k) for k in reset_keys}, batch_size=masks.batch_size)
                if all(bool(td.get(k).all()) for k in reset_keys) and "_reset" in reset_keys:
                    td = None
            try:
                out = envs[j].reset(td, **kwargs)
                self._write(j, self.root_pairs[j], out, "reset")
            except Exception as exc:
                raise self._blame(exc, j, "reset") from None
        return None

    def set_seed(
        self, seed: int | None, static_seed: bool, active: Sequence[int] | None = None
    ) -> int | None:
        """Seed each env (of ``active``) with the seed the previous one returned; return
        the last."""
        for j in self._active(active):
            seed = self.envs[j].set_seed(seed, static_seed=static_seed)
        return seed

    def get_attr(self, name: str, active: Sequence[int] | None = None) -> list[Any]:
        """``getattr(env, name)`` of every env (of ``active``)."""  # Any: env attributes
        return [getattr(self.envs[j], name) for j in self._active(active)]

    def is_method(self, name: str) -> bool:
        """Whether ``name`` is a method (a callable attribute) of the first env."""
        return callable(getattr(self.envs[0], name))

    def call(
        self, name: str, args: tuple, kwargs: dict, active: Sequence[int] | None = None
    ) -> list[Any]:  # Any: method results
        """Call the method ``name`` on every env (of ``active``)."""
        return [getattr(self.envs[j], name)(*args, **kwargs) for j in self._active(active)]

    # ------------------------------------------------------------------ in-place batches
    def attach_fill(self, batch: TensorDictBase) -> None:
        """Take the group's rows of a ``[num_envs, T]`` batch to step in place (see ``_buffered``)."""
        self._fill = GroupFill(self.envs, self.offset)
        self._fill.attach(batch)

    def prepare_fill(self) -> bool:
        """Make every sub-env's stepper for the attached rows; ``False`` if one declines."""
        fill = getattr(self, "_fill", None)
        return fill is not None and fill.prepare()

    def fill_batch(self, reset_last: bool) -> tuple | None:
        """Step every sub-env through the attached rows; the resets made (batch indices)."""
        return self._fill.fill(reset_last)

    def metadata(self) -> list[EnvMetaData]:
        """The metadata of every env."""
        return [_metadata(env) for env in self.envs]

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


def flat_entries(td: TensorDictBase) -> list[tuple[str, torch.Tensor]] | None:
    """``td``'s entries, listed once, when they are all plain tensors (``None`` otherwise)."""
    entries = list(td.items())
    unnamed = all(name is None for name in td.names)
    if unnamed and all(type(v) is torch.Tensor for _, v in entries):
        return entries
    return None


def _gather(
    data: TensorDictBase,
    keys: Sequence[NestedKey],
    shapes: Sequence[torch.Size],
    columns: list[list[torch.Tensor]],
) -> bool:
    """Append ``data``'s entry of each key to its column; ``False`` if one is missing or
    is not a tensor of its ``shapes`` entry (the columns are then left partly filled)."""
    top = entries(data)  # one mapping for the top-level keys (a plain dict read each)
    for key, shape, column in zip(keys, shapes, columns):
        src = top.get(key) if type(key) is str else get_entry(data, key)
        if not isinstance(src, torch.Tensor) or src.shape != shape:
            return False
        column.append(src)
    return True


def _metadata(env: EnvBase) -> EnvMetaData:
    """``EnvMetaData.metadata_from_env``, with empty data for dynamic (-1) specs."""
    if not key_layout(env)["dynamic"]:
        return EnvMetaData.metadata_from_env(env)
    bs = env.batch_size
    return EnvMetaData(
        tensordict=TensorDict({"next": TensorDict(batch_size=bs)}, batch_size=bs),
        specs=env.specs.clone(),
        batch_size=bs,
        env_str=str(env),
        device=env.device,
        batch_locked=env.batch_locked,
    )


def build_envs(fns: Sequence[Callable[..., EnvBase]], kwargs: Sequence[dict]) -> list[EnvBase]:
    """Call each factory with its kwargs, checking that it returns an ``EnvBase``."""
    envs = []
    for fn, kw in zip(fns, kwargs):
        env = fn(**kw)
        if not isinstance(env, EnvBase):
            raise TypeError(
                f"create_env_fn must return an EnvBase, {fn!r} returned "
                f"{type(env).__name__}. Wrap the env (e.g. GymWrapper) or return an EnvBase."
            )
        envs.append(env)
    return envs
