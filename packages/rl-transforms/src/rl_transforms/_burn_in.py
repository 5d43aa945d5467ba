"""``BurnInTransform``: refresh recurrent states at the start of sampled slices.

A replay buffer stores recurrent states computed by an old version of the
network. This transform runs the current recurrent modules over the first
``burn_in`` steps of each sampled slice and writes the states they reach into the
first step of the remaining slice, which is returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rl_specs import Composite
from rl_transforms._base import Transform


def _strip_next(key: NestedKey) -> NestedKey:
    if isinstance(key, tuple) and len(key) > 1 and key[0] == "next":
        return key[1:] if len(key) > 2 else key[1]
    return key


class BurnInTransform(Transform):
    """Transform to partially burn-in data sequences.

    The input's last batch dim is time. The modules run (without gradients) over
    the first ``burn_in`` steps; for each ``out_key``, the value the modules wrote
    at ``("next", out_key)`` on the last burn-in step becomes the ``out_key`` of the
    first remaining step. The remaining ``T - burn_in`` steps are returned; the
    input is not modified. Meant for replay buffers (``rb.append_transform``), not
    for environments.

    Args:
        modules (TensorDictModuleBase or sequence of them): the recurrent modules, run
            in order; each must process a time sequence (a recurrent module in
            sequence mode).
        burn_in (int): the number of time steps to burn in.
        out_keys (sequence of NestedKey, optional): the states to refresh, written
            without the ``"next"`` prefix. Defaults to every module ``out_key`` under
            ``"next"`` (``("next", "hidden")`` gives ``"hidden"``).

    Raises:
        TypeError: if a module is not a ``TensorDictModuleBase``.
        ValueError: if ``burn_in < 0``, or (at call time) if the data holds no more
            than ``burn_in`` steps.
        KeyError: at call time, if the modules did not write ``("next", out_key)``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class RunningSum(torch.nn.Module):  # a toy recurrent cell over time (dim 1)
        ...     def forward(self, obs, hidden):
        ...         return hidden[:, :1] + obs.cumsum(1)
        >>> module = TensorDictModule(RunningSum(), ["obs", "hidden"], [("next", "hidden")])
        >>> data = TensorDict({"obs": torch.ones(2, 5, 1), "hidden": torch.zeros(2, 5, 1)}, [2, 5])
        >>> out = BurnInTransform(module, burn_in=3)(data)
        >>> out.shape, out["hidden"][:, 0].squeeze(-1)
        (torch.Size([2, 2]), tensor([3., 3.]))
    """

    invertible = False

    def __init__(
        self,
        modules: TensorDictModuleBase | Sequence[TensorDictModuleBase],
        burn_in: int,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        if isinstance(modules, TensorDictModuleBase):
            modules = [modules]
        modules = list(modules)
        for module in modules:
            if not isinstance(module, TensorDictModuleBase):
                raise TypeError(
                    f"BurnInTransform expected TensorDictModuleBase modules (tensordict.nn), "
                    f"got {type(module).__name__}. Wrap the network in a TensorDictModule."
                )
        if not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(f"BurnInTransform expected burn_in >= 0, got {burn_in!r}.")
        in_keys: list[NestedKey] = []
        for module in modules:
            in_keys += [k for k in module.in_keys if k not in in_keys]
        if out_keys is None:
            out_keys = []
            for module in modules:
                for key in module.out_keys:
                    if isinstance(key, tuple) and key[0] == "next" and len(key) > 1:
                        out_keys.append(_strip_next(key))
        else:
            out_keys = [_strip_next(key) for key in out_keys]
        super().__init__()
        self._in_keys = in_keys
        self._out_keys = list(dict.fromkeys(out_keys))
        self.modules_list = torch.nn.ModuleList(modules)
        self.burn_in = burn_in

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Burn in the first steps and return the rest, states refreshed."""
        if self.burn_in == 0:
            return tensordict
        if tensordict.batch_dims == 0:
            raise ValueError(
                "BurnInTransform expected data whose last batch dim is time, got a "
                "tensordict with no batch dims. Sample slices (e.g. with a SliceSampler)."
            )
        steps = tensordict.batch_size[-1]
        if steps <= self.burn_in:
            raise ValueError(
                f"BurnInTransform(burn_in={self.burn_in}) expected more than {self.burn_in} "
                f"time steps in the last batch dim, got {steps} (batch size "
                f"{tuple(tensordict.batch_size)}). Sample longer slices or lower burn_in."
            )
        head = tensordict[..., : self.burn_in].copy()
        rest = tensordict[..., self.burn_in :].copy()
        device = tensordict.device
        with torch.no_grad():
            for module in self.modules_list:
                params = next(module.parameters(), None)
                if params is not None and device is not None and params.device != device:
                    head = head.to(params.device)
                head = module(head)
        last = head.get("next", None)
        time_dim = tensordict.batch_dims - 1
        for key in self._out_keys:
            value = last.get(key, None) if last is not None else None
            if value is None:
                raise KeyError(
                    f"BurnInTransform expected the modules to write ('next', {key!r}), found "
                    f"no such entry after the burn-in. Module out_keys: "
                    f"{[m.out_keys for m in self.modules_list]}. Pass out_keys naming the "
                    f"states the modules write under 'next'."
                )
            state = value.select(time_dim, -1)
            if device is not None:
                state = state.to(device)
            current = rest.get(key, None)
            if current is None:
                current = torch.zeros(
                    (*rest.batch_size, *state.shape[time_dim:]),
                    dtype=state.dtype,
                    device=state.device,
                )
            else:
                current = current.clone()  # never write into the sampled storage
            current.select(time_dim, 0).copy_(state)
            rest.set(key, current)
        return rest

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "BurnInTransform works on sampled sequences and cannot run in an environment. "
            "Append it to a replay buffer: rb.append_transform(BurnInTransform(...))."
        )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"BurnInTransform(burn_in={self.burn_in}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )
