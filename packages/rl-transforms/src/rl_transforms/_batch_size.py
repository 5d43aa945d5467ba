"""``BatchSizeTransform``: give an environment another batch size.

Two uses: reshape a batched env (``reshape_fn``, or a ``batch_size`` with as many
elements), and run an env that is not batch-locked (a stateless env that steps
whatever batch it is given) under a batched policy (``batch_size``): its first
data is expanded to the batch size, or built by ``reset_func``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core import EnvBase
from rl_envs_core.extension import entries, new_unchecked
from rl_specs import Composite
from rl_transforms._base import Transform

ResetFunc = Callable[..., TensorDictBase]


def _reshape(
    data: TensorDictBase,
    shape: torch.Size,
    memo: dict[torch.Size, tuple[int, ...]] | None = None,
    *,
    known: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    record: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> TensorDictBase:
    """``data.reshape(shape)``, built directly from the entries of a plain ``TensorDict``.

    Every entry keeps its feature dims after the batch dims, so the result holds
    valid entries by construction and is built without re-checking them (this runs
    twice per step: the action going in, the step's output coming out).

    Args:
        data: the tensordict to reshape.
        shape: its new batch size.
        memo: entry shape -> reshaped entry shape, filled as shapes are met; one memo
            per direction (same batch dims, same ``shape``).
        known: name -> ``(tensor, reshaped)``: an entry that *is* ``tensor`` becomes
            ``reshaped`` without a new view. The next step's input holds the entries of
            the step output this transform reshaped, and their originals are known.
        record: receives ``name -> (reshaped, tensor)`` for the top-level tensors.
    """
    if type(data) is not TensorDict:
        return data.reshape(shape)
    memo = {} if memo is None else memo
    out = {}
    for key, value in entries(data).items():
        if known is not None:
            pair = known.get(key)
            if pair is not None and pair[0] is value:
                out[key] = pair[1]
                continue
        if type(value) is torch.Tensor or isinstance(value, torch.Tensor):
            old = value.shape
            target = memo.get(old)
            if target is None:  # the batch dims are read once per entry shape
                target = memo[old] = (*shape, *old[data.batch_dims :])
            new = out[key] = value.reshape(*target)
            if record is not None:
                record[key] = (new, value)
        elif type(value) is TensorDict and value.batch_dims == data.batch_dims:
            out[key] = _reshape(value, shape, memo)
        else:  # non-tensor data, lazy stacks, more batch dims below: the generic path
            return data.reshape(shape)
    return new_unchecked(out, shape, data.device, nested=False)


def _as_batch(data: TensorDictBase, shape: torch.Size, what: str) -> TensorDictBase:
    """``data`` with batch size ``shape``: itself, reshaped, or expanded (and copied)."""
    current = data.batch_size
    if current == shape:
        return data
    if current.numel() == shape.numel():
        return _reshape(data, shape)
    try:
        return data.expand(shape).clone()
    except (RuntimeError, ValueError) as err:
        raise ValueError(
            f"BatchSizeTransform cannot bring the {what} of batch size {tuple(current)} to "
            f"{tuple(shape)}: it is neither a reshape (same number of elements) nor an "
            f"expansion (the current batch size must broadcast to the new one). Pass a "
            f"batch_size that the env's batch size expands or reshapes to."
        ) from err


class _Reshaping(NamedTuple):
    """How a reshaped env maps batches: both batch sizes and one shape memo per direction."""

    inner: torch.Size  # the parent env's batch size
    outer: torch.Size  # the transformed env's
    memo_out: dict[torch.Size, tuple[int, ...]]  # step outputs, inner -> outer
    memo_in: dict[torch.Size, tuple[int, ...]]  # step inputs, outer -> inner


class BatchSizeTransform(Transform):
    """A transform to modify the batch-size of an environment.

    With ``batch_size``, the env takes that batch size: a batched env whose number
    of elements matches is reshaped; an env that is not batch-locked (it steps
    whatever batch it receives) gets its first data expanded to the batch size,
    then steps batched tensordicts. With ``reshape_fn``, the batch size is that of
    ``reshape_fn(data)`` (``reshape``, ``flatten``, ``squeeze``, ``unsqueeze``,
    ``view``), and actions are reshaped back before they reach the env.

    Keyword Args:
        batch_size (torch.Size or sequence of int, optional): the new batch size.
            Exclusive with ``reshape_fn``. Defaults to ``None``.
        reshape_fn (callable, optional): ``tensordict -> tensordict`` changing the
            batch size without changing the number of elements. Exclusive with
            ``batch_size``. Defaults to ``None``.
        reset_func (callable, optional): ``reset_func(tensordict, tensordict_reset)``
            returning the first data of an episode: ``tensordict`` is what was passed
            to ``env.reset`` (or an empty tensordict of the new batch size),
            ``tensordict_reset`` the output of the parent env's reset. Use it to draw
            a different start for each element. Defaults to ``None`` (expand or
            reshape the parent's reset output).
        env_kwarg (bool, optional): call ``reset_func`` with an ``env=`` keyword
            argument holding the transformed env. Defaults to ``False``.

    Raises:
        ValueError: if both or neither of ``batch_size`` and ``reshape_fn`` are given,
            or if the env's batch size can neither be reshaped nor expanded to the new one.
        TypeError: if ``reshape_fn`` or ``reset_func`` is not callable, or if
            ``env_kwarg=True`` and ``reset_func`` takes no ``env`` keyword.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(
        ...     CountingEnv(batch_size=[4]), BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2))
        ... )
        >>> env.batch_size, env.rollout(3).shape
        (torch.Size([2, 2]), torch.Size([2, 2, 3]))
        >>> env = TransformedEnv(CountingEnv(batch_size=[4]), BatchSizeTransform(batch_size=[4, 1]))
        >>> env.reset()["observation"].shape
        torch.Size([4, 1, 1])
    """

    def __init__(
        self,
        *,
        batch_size: torch.Size | Sequence[int] | None = None,
        reshape_fn: Callable[[TensorDictBase], TensorDictBase] | None = None,
        reset_func: ResetFunc | None = None,
        env_kwarg: bool = False,
    ) -> None:
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError(
                f"BatchSizeTransform expected exactly one of batch_size and reshape_fn, got "
                f"batch_size={batch_size!r} and reshape_fn={reshape_fn!r}. Pass batch_size= "
                f"for a fixed batch size or reshape_fn= to reshape the env's."
            )
        if reshape_fn is not None and not callable(reshape_fn):
            raise TypeError(
                f"BatchSizeTransform expected reshape_fn to be a callable tensordict -> "
                f"tensordict, got {type(reshape_fn).__name__}."
            )
        if reset_func is not None and not callable(reset_func):
            raise TypeError(
                f"BatchSizeTransform expected reset_func to be callable, got "
                f"{type(reset_func).__name__}."
            )
        if env_kwarg and reset_func is not None and not _accepts_env(reset_func):
            raise TypeError(
                "BatchSizeTransform(env_kwarg=True) calls reset_func(tensordict, "
                "tensordict_reset, env=env), but the given reset_func takes no 'env' keyword. "
                "Add an env parameter or pass env_kwarg=False."
            )
        super().__init__()
        self.batch_size = torch.Size(batch_size) if batch_size is not None else None
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = env_kwarg
        self.__dict__["_sources"] = None  # the last step's (reshaped, original) tensors

    # ------------------------------------------------------------------ shapes
    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        """The batch size of the env once transformed, given the parent's ``batch_size``."""
        if self.batch_size is not None:
            return self.batch_size
        probe = self.reshape_fn(TensorDict(batch_size=batch_size, device="meta"))
        if probe.batch_size.numel() != batch_size.numel():
            raise ValueError(
                f"BatchSizeTransform expected reshape_fn to keep the number of elements, but "
                f"it maps batch size {tuple(batch_size)} to {tuple(probe.batch_size)}. Use "
                f"batch_size= to expand an env that is not batch-locked."
            )
        return probe.batch_size

    def _shapes(self) -> tuple[torch.Size, torch.Size]:
        """(parent batch size, new batch size), known once the specs went through."""
        shapes = self._lazy.get("shapes")
        if shapes is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError(
                    "BatchSizeTransform needs to know the env's batch size: use it inside a "
                    "TransformedEnv (env.append_transform(BatchSizeTransform(...)))."
                )
            inner = parent.batch_size
            shapes = self._lazy["shapes"] = (inner, self.transform_env_batch_size(inner))
        return shapes

    # ------------------------------------------------------------------ data
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.reshape_fn is not None:
            plan = self._reshaping()
            if plan is not None and next_tensordict.batch_size == plan.inner:
                # reshape-family functions keep the element order: a direct reshape is the same
                return _reshape(next_tensordict, plan.outer, plan.memo_out)
            return self.reshape_fn(next_tensordict)
        return _as_batch(next_tensordict, self.batch_size, "step output")

    def _reshaping(self) -> _Reshaping | None:
        """The reshape plan when the env is reshaped (same element count), else ``None``."""
        lazy = self._lazy
        if "reshaping" not in lazy:
            shapes = lazy.get("shapes")
            if shapes is None:
                return None  # the specs did not go through yet: nothing to cache
            inner, outer = shapes
            same_count = inner != outer and inner.numel() == outer.numel()
            lazy["reshaping"] = _Reshaping(inner, outer, {}, {}) if same_count else None
        return lazy["reshaping"]

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        plan = self._reshaping()
        if plan is None or next_tensordict.batch_size != plan.inner:
            self.__dict__["_sources"] = None
            return self._call(next_tensordict)
        # remember which base-env tensor each reshaped entry views: the next step's
        # input holds these entries, and the inverse hands the base env its own tensors
        record: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        out = _reshape(next_tensordict, plan.outer, plan.memo_out, record=record)
        self.__dict__["_sources"] = record
        return out

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Reshape (``reshape_fn``) or expand (``batch_size``) a tensordict."""
        return self._call(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._lazy.get("shapes") is None:
            if self.parent is None:
                return tensordict  # out of an env (a replay buffer): no env batch size to go back to
            self._shapes()
        plan = self._reshaping()
        if plan is not None and tensordict.batch_size == plan.outer:
            return _reshape(tensordict, plan.inner, plan.memo_in, known=self.__dict__.get("_sources"))
        return tensordict  # an env that is not batch-locked steps the new batch as it is

    def _has_inverse(self) -> bool:
        return True

    def _inv_writes_input(self) -> bool:
        return False  # the inverse returns its input untouched or a reshaped new tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.reset_func is not None:
            if self.env_kwarg:
                tensordict_reset = self.reset_func(
                    tensordict, tensordict_reset, env=self._owning_env()
                )
            else:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset)
        if self.reshape_fn is not None:
            _, outer = self._shapes()
            if tensordict_reset.batch_size == outer:
                return tensordict_reset
            return self.reshape_fn(tensordict_reset)
        return _as_batch(tensordict_reset, self.batch_size, "reset output")

    def _owning_env(self) -> EnvBase | None:
        holder = self.container
        while holder is not None and not isinstance(holder, EnvBase):
            holder = holder.container
        return holder

    # ------------------------------------------------------------------ specs
    def _new_shape(self, spec: Composite) -> torch.Size:
        inner = spec.shape
        outer = self.transform_env_batch_size(inner)
        self._lazy["shapes"] = (inner, outer)
        self._lazy.pop("reshaping", None)  # with its memos, which map to the old shapes
        return outer

    def _resize(self, spec: Composite, outer: torch.Size) -> Composite:
        inner = spec.shape
        if inner == outer:
            return spec
        if inner.numel() == outer.numel():
            if not outer:  # every dim is 1: index them away
                return spec[(0,) * len(inner)]
            return spec.reshape(outer)
        try:
            return spec.expand(outer)
        except (RuntimeError, ValueError) as err:
            raise ValueError(
                f"BatchSizeTransform cannot give an env of batch size {tuple(inner)} the "
                f"batch size {tuple(outer)}: it is neither a reshape (same number of "
                f"elements) nor an expansion of it. Pick a batch size that "
                f"{tuple(inner)} broadcasts or reshapes to."
            ) from err

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return self._resize(output_spec, self._new_shape(output_spec))

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        return self._resize(input_spec, self._new_shape(input_spec))

    def __repr__(self) -> str:
        how = (
            f"batch_size={tuple(self.batch_size)}"
            if self.batch_size is not None
            else f"reshape_fn={self.reshape_fn!r}"
        )
        return f"BatchSizeTransform({how})"


def _accepts_env(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: trust the caller
        return True
    return any(p.name == "env" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
