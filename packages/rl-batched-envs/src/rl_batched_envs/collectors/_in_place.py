"""A policy acting on an in-place batch: called on views of each step's root entries.

The in-place path of the collectors (``rl_envs_core.extension.BufferedRollout``)
steps the env one step at a time when a policy chooses the actions
(:meth:`BufferedRollout.start`): before step ``t`` the policy gets the root
entries of ``batch[..., t]`` (views of the batch, written from the previous step's
``"next"`` or the reset values), and its outputs (the action, and any other entry
it writes, e.g. a log-probability) are copied into the batch at ``t``. No
per-step tensordict is built by the env, no list of steps is stacked at the end.

Two kinds of policy take this path: a ``TensorDictModule`` (anything with
``in_keys`` / ``out_keys``) reading only root observations and done flags, and a
plain callable on observations (``lambda observation: ...``). The entries a policy
writes are learnt from a batch of the general path (its first batch, whose first
output is checked against the action spec); a policy writing anything else than
tensors of a fixed layout, or entries under ``"next"``, keeps the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rl_batched_envs._td import bare_module
from rl_batched_envs.collectors._policy import _signature_names, action_values
from rl_envs_core import EnvBase
from rl_envs_core.extension import StepByStep, new_unchecked

__all__ = ["PolicyOnViews"]


def _flat(key: NestedKey) -> NestedKey:
    if isinstance(key, tuple) and len(key) == 1:
        return key[0]
    return key


class PolicyOnViews:
    """How a collector calls its policy on an in-place batch, or why it cannot.

    Args:
        env (EnvBase): the env.
        policy (callable): the collector's policy.
        carried (list of str): the root entries the engine writes (observations,
            done flags): what the policy may read.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> env = CountingEnv()
        >>> plan = PolicyOnViews(env, lambda observation: observation.long(), ["observation"])
        >>> plan.kind, plan.ready  # learns its outputs from a first batch of the general path
        ('plain', False)
    """

    def __init__(self, env: EnvBase, policy: Callable, carried: Sequence[str]) -> None:
        self.env, self.policy = env, policy
        self.carried = list(carried)
        self.action_keys = [_flat(k) for k in env.action_keys]
        self.kind: str | None = None
        self.inputs: list[str] = []
        self.outputs: list[NestedKey] = []
        self.layout: dict[NestedKey, tuple[torch.Size, torch.dtype]] | None = None
        self.module: Callable | None = None  # a plain TensorDictModule's own module
        self.module_out_keys: list[NestedKey] = []
        if isinstance(policy, TensorDictModuleBase):
            ins = [_flat(k) for k in getattr(policy, "in_keys", ())]
            outs = [_flat(k) for k in getattr(policy, "out_keys", ())]
            if ins and set(ins) <= set(self.carried) and self._writable(outs):
                self.kind, self.inputs = "module", list(dict.fromkeys(ins))
                self.outputs = list(dict.fromkeys([*self.action_keys, *outs]))
                module = bare_module(policy)  # None unless a plain TensorDictModule
                if (
                    module is not None
                    and set(self.outputs) <= set(outs)
                    and policy.out_keys_source == policy.out_keys
                ):  # its module alone computes every output: called without the wrapper
                    self.module, self.module_out_keys = module, outs
        else:
            names = _signature_names(policy)
            if (
                names
                and set(names) <= set(self.carried)
                and set(names) <= {k for k in env.observation_keys if isinstance(k, str)}
            ):
                self.kind, self.inputs, self.outputs = "plain", names, list(self.action_keys)

    def _writable(self, outs: list[NestedKey]) -> bool:
        for key in outs:
            head = key if isinstance(key, str) else key[0]
            if head in ("next", "collector") or key in self.carried:
                return False
        return True

    @property
    def ready(self) -> bool:
        """Whether the policy's outputs are known (from a batch of the general path)."""
        return self.kind is not None and self.layout is not None

    def learn(self, batch: TensorDictBase) -> None:
        """Read the policy's outputs off ``batch`` (a batch of the general path).

        The path is given up for good (``kind = None``) when the batch's root holds
        entries other than the carried ones and the expected outputs, or an output
        that is not a tensor.
        """
        if self.kind is None or self.layout is not None:
            return
        dim = len(self.env.batch_size) + 1
        root = {
            _flat(k)
            for k in batch.keys(True, True)
            if (k if isinstance(k, str) else k[0]) not in ("next", "collector")
        }
        expected = set(self.carried) | set(self.outputs)
        heads = {k if isinstance(k, str) else k[0] for k in expected}
        if root != expected or set(batch.keys()) - {"next", "collector"} != heads:
            self.kind = None  # (the leaves leave non-tensor entries out: the heads show them)
            return
        layout = {}
        for key in self.outputs:
            value = batch.get(key)
            if type(value) is not torch.Tensor:  # no subclass, no non-tensor data
                self.kind = None
                return
            layout[key] = (value.shape[dim:], value.dtype)
        self.layout = layout

    def allocate(self, batch: TensorDictBase) -> None:
        """Add the policy's entries other than the actions to ``batch``."""
        assert self.layout is not None
        size = batch.batch_size
        for key in self.outputs:
            if key in self.action_keys:
                continue
            shape, dtype = self.layout[key]
            batch.set(key, torch.empty((*size, *shape), dtype=dtype))

    def fits(self, out: TensorDictBase) -> bool:
        """Whether a caller's batch ``out`` has every policy entry, in its layout."""
        assert self.layout is not None
        size = out.batch_size
        for key in self.outputs:
            value = out.get(key, None)
            shape, dtype = self.layout[key]
            if (
                not isinstance(value, torch.Tensor)
                or value.shape != (*size, *shape)
                or value.dtype != dtype
            ):
                return False
        return True

    def collect(self, run: StepByStep, batch: TensorDictBase, steps: int) -> None:
        """Call the policy before each of the ``steps`` steps of ``run``; step it."""
        dim = len(self.env.batch_size)
        # a step's views are taken when needed (T live views per entry would keep
        # Python's garbage collector busy); a step's rows of an [env, time] entry are
        # strided, so the policy gets contiguous copies there
        if dim:

            def at(v: torch.Tensor, t: int) -> torch.Tensor:
                return v.select(dim, t).contiguous()
        else:

            def at(v: torch.Tensor, t: int) -> torch.Tensor:
                return v[t]

        ins = [(key, batch.get(key)) for key in self.inputs]
        outs = [(key, batch.get(key)) for key in self.outputs]
        policy, size, step = self.policy, self.env.batch_size, run.step
        out_keys = [key for key, _ in outs]
        module = self.module if self.kind == "module" else None
        if module is not None:
            # a plain TensorDictModule: its module on the inputs, outputs by out_keys
            # (what its call computes, without building a tensordict per step)
            dst_of = dict(outs)
            targets = [(key, dst_of.get(key)) for key in self.module_out_keys]
            for t in range(steps):
                result = module(*[at(v, t) for _, v in ins])
                for (key, dst), value in zip(targets, _as_outputs(result, targets, policy)):
                    if dst is not None:
                        _write(key, value, dst.select(dim, t), policy)
                step(t)
            return
        if self.kind == "module":
            for t in range(steps):
                source = {k: at(v, t) for k, v in ins}
                result = policy(new_unchecked(source, size, nested=False))
                for key, dst in outs:
                    _write(key, result.get(key, None), dst.select(dim, t), policy)
                step(t)
            return
        for t in range(steps):
            values = action_values(policy, policy(*[at(v, t) for _, v in ins]), out_keys)
            for (key, dst), value in zip(outs, values):
                _write(key, value, dst.select(dim, t), policy)
            step(t)


def _as_outputs(result: Any, targets: list, policy: Any) -> tuple:  # Any: a module's output
    """A module's result as one value per out key, as ``TensorDictModule`` reads it."""
    keys = [key for key, _ in targets]
    if isinstance(result, (dict, TensorDictBase)) and all(key in result for key in keys):
        return tuple(result[key] for key in keys)
    values = result if isinstance(result, tuple) else (result,)
    if len(values) != len(keys):
        raise RuntimeError(
            f"The collector's policy {policy!r} returned {len(values)} tensor(s) for its "
            f"{len(keys)} out_keys {keys}. Return one tensor per out key."
        )
    return values


def _write(key: NestedKey, value: Any, dst: torch.Tensor, policy: Any) -> None:  # Any: output
    """Copy one policy output into the batch, refusing a change of layout."""
    if not isinstance(value, torch.Tensor) or value.shape != dst.shape or value.dtype != dst.dtype:
        got = (
            f"shape {tuple(value.shape)} and dtype {value.dtype}"
            if isinstance(value, torch.Tensor)
            else repr(type(value).__name__)
        )
        raise ValueError(
            f"The collector's policy {policy!r} wrote {key!r} with {got}; its earlier "
            f"outputs had shape {tuple(dst.shape)} and dtype {dst.dtype}. A policy must "
            f"write the same entries with the same shapes and dtypes at every step."
        )
    dst.copy_(value)
