"""Shape transforms: :class:`UnsqueezeTransform`, :class:`SqueezeTransform`,
:class:`PermuteTransform`, :class:`FlattenObservation`, :class:`CatTensors` and :class:`Stack`.

Dims are negative (counted from the end) so that batch dims never shift them; pass
``allow_positive_dim=True`` to count from the start of the tensor instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, is_tensor_collection

from rl_specs import Composite, TensorSpec, Unbounded
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg, key_list, missing_key_error, spec_get
from rl_transforms._spec_ops import map_spec


def _check_dim(owner: str, dim: int, allow_positive_dim: bool, name: str = "dim") -> int:
    if dim >= 0 and not allow_positive_dim:
        raise ValueError(
            f"{owner} expected a negative {name} (counted from the end, so batch dims do not "
            f"shift it), got {name}={dim}. Pass a negative {name}, or allow_positive_dim=True."
        )
    return dim


class UnsqueezeTransform(Transform):
    """Inserts a dimension of size one at the specified position.

    The inverse (for ``in_keys_inv``) removes that dimension again.

    Args:
        dim (int): where to insert the dim (negative).

    Keyword Args:
        allow_positive_dim (bool, optional): accept ``dim >= 0``. Defaults to ``False``.
        in_keys (sequence of NestedKey, optional): entries to unsqueeze. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.

    Raises:
        ValueError: if ``dim`` is ``None`` or non-negative without ``allow_positive_dim``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = UnsqueezeTransform(-1, in_keys=["obs"])
        >>> t(TensorDict({"obs": torch.zeros(2, 3)}, [2]))["obs"].shape
        torch.Size([2, 3, 1])
    """

    def __init__(
        self,
        dim: int | None = None,
        *,
        allow_positive_dim: bool = False,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        if dim is None:
            raise ValueError(f"{type(self).__name__} needs dim=, got None. Pass e.g. dim=-1.")
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dim = _check_dim(type(self).__name__, dim, allow_positive_dim)
        self.allow_positive_dim = allow_positive_dim

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.unsqueeze(self.dim)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.squeeze(self.dim)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return map_spec(spec, self._apply_transform)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, in_keys={self.in_keys})"


class SqueezeTransform(UnsqueezeTransform):
    """Removes a dimension of size one at the specified position.

    As with :func:`torch.squeeze`, an entry whose size at ``dim`` is not one is left
    unchanged. The inverse (for ``in_keys_inv``) inserts the dim back. Arguments are
    those of :class:`UnsqueezeTransform`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SqueezeTransform(-1, in_keys=["obs"])
        >>> t(TensorDict({"obs": torch.zeros(2, 3, 1)}, [2]))["obs"].shape
        torch.Size([2, 3])
        >>> t(TensorDict({"obs": torch.zeros(2, 3)}, [2]))["obs"].shape  # size 3: unchanged
        torch.Size([2, 3])
    """

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.squeeze(self.dim)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.unsqueeze(self.dim)


class PermuteTransform(Transform):
    """Permutation transform.

    Permutes the trailing ``len(dims)`` dims of each entry; ``dims`` is a reordering
    of ``[-len(dims), ..., -1]``. The inverse applies the opposite permutation.

    Args:
        dims (sequence of int): the new order of the trailing dims.
        in_keys (sequence of NestedKey, optional): entries to permute. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): base-side inverse entries. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): policy-side inverse entries.
            Defaults to ``in_keys_inv``.

    Raises:
        ValueError: if ``dims`` is not a permutation of the trailing dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = PermuteTransform((-1, -3, -2), in_keys=["pixels"])
        >>> t(TensorDict({"pixels": torch.zeros(4, 5, 3)}))["pixels"].shape
        torch.Size([3, 4, 5])
    """

    def __init__(
        self,
        dims: Sequence[int],
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
    ) -> None:
        dims = [int(d) for d in dims]
        size = len(dims)
        if sorted(d if d < 0 else d - size for d in dims) != list(range(-size, 0)):
            raise ValueError(
                f"PermuteTransform expected dims to reorder the trailing {size} dims "
                f"(a permutation of {list(range(-size, 0))}), got {dims}."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.dims = [d if d < 0 else d - size for d in dims]
        self._inverse = [self.dims.index(d) - size for d in range(-size, 0)]

    @staticmethod
    def _permute(value: torch.Tensor, dims: list[int]) -> torch.Tensor:
        lead = value.ndim - len(dims)
        return value.permute(*range(lead), *(lead + len(dims) + d for d in dims))

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return self._permute(obs, self.dims)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return self._permute(state, self._inverse)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return map_spec(spec, self._apply_transform)


class FlattenObservation(Transform):
    """Flatten adjacent dimensions of a tensor.

    Args:
        first_dim (int): the first dim flattened (negative).
        last_dim (int): the last dim flattened (negative).
        in_keys (sequence of NestedKey, optional): entries to flatten. Defaults to ``["pixels"]``.
        out_keys (sequence of NestedKey, optional): destination entries. Defaults to ``in_keys``.
        allow_positive_dim (bool, optional): accept non-negative dims. Defaults to ``False``.

    Raises:
        ValueError: if a dim is non-negative without ``allow_positive_dim``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = FlattenObservation(-2, -1, in_keys=["obs"])
        >>> t(TensorDict({"obs": torch.zeros(2, 3, 4)}, [2]))["obs"].shape
        torch.Size([2, 12])
    """

    def __init__(
        self,
        first_dim: int,
        last_dim: int,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        allow_positive_dim: bool = False,
    ) -> None:
        super().__init__(in_keys if in_keys is not None else ["pixels"], out_keys)
        self.first_dim = _check_dim(
            "FlattenObservation", first_dim, allow_positive_dim, "first_dim"
        )
        self.last_dim = _check_dim("FlattenObservation", last_dim, allow_positive_dim, "last_dim")

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.flatten(self.first_dim, self.last_dim)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        return map_spec(spec, self._apply_transform)


def _sorted_keys(keys: list[NestedKey]) -> list[NestedKey]:
    return sorted(keys, key=lambda k: (k,) if isinstance(k, str) else k)


class CatTensors(Transform):
    """Concatenates several keys in a single tensor.

    Args:
        in_keys (sequence of NestedKey, optional): entries to concatenate. Defaults to
            every observation entry of the env.
        out_key (NestedKey, optional): the result. Defaults to ``"observation_vector"``.
        dim (int, optional): the (negative) concatenation dim. Defaults to ``-1``.

    Keyword Args:
        del_keys (bool, optional): remove the inputs. Defaults to ``True``.
        unsqueeze_if_oor (bool, optional): unsqueeze inputs that lack ``dim``. Defaults to ``False``.
        sort (bool, optional): sort ``in_keys`` first. Defaults to ``True``.

    Raises:
        ValueError: if ``dim`` is non-negative.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CatTensors(["b", "a"], "v")
        >>> td = t(TensorDict({"a": torch.zeros(2), "b": torch.ones(1)}))
        >>> td["v"], sorted(td.keys())
        (tensor([0., 0., 1.]), ['v'])
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        *,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
        sort: bool = True,
    ) -> None:
        _check_dim("CatTensors", dim, False)
        keys = key_list(in_keys, owner="CatTensors", name="in_keys")
        super().__init__(_sorted_keys(keys) if sort else keys)
        self._out_keys = key_list(out_key, owner="CatTensors", name="out_key")
        self._auto_keys = in_keys is None
        self.out_key = out_key
        self.dim = dim
        self.del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor
        self.sort = sort

    def _gather(self, tensordict: TensorDictBase) -> list[torch.Tensor] | None:
        values = []
        for key in self._in_keys:
            value = tensordict.get(key, None)
            if value is None:
                if self._missing_tolerance:
                    return None
                raise missing_key_error("CatTensors", key, tensordict, "in_keys")
            if self.unsqueeze_if_oor and value.ndim < -self.dim + tensordict.batch_dims:
                value = value.unsqueeze(self.dim)
            values.append(value)
        return values

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        values = self._gather(next_tensordict)
        if values is None or not values:
            return next_tensordict
        next_tensordict.set(self.out_key, torch.cat(values, self.dim))
        if self.del_keys:
            next_tensordict = next_tensordict.exclude(
                *[k for k in self._in_keys if k != self.out_key]
            )
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if self._auto_keys:
            keys = [k for k in observation_spec.keys(True, True) if k != self.out_key]
            self._in_keys = _sorted_keys(keys) if self.sort else keys
        leaves = [spec_get(observation_spec, k) for k in self._in_keys]
        if not leaves or any(leaf is None for leaf in leaves):
            return observation_spec
        shape = list(leaves[0].shape)
        shape[self.dim] = sum(leaf.shape[self.dim] for leaf in leaves)
        first = leaves[0]
        if self.del_keys:
            for key in self._in_keys:
                del observation_spec[key]
        observation_spec[self.out_key] = Unbounded(
            shape=shape, dtype=first.dtype, device=first.device
        )
        return observation_spec

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_key!r}, dim={self.dim})"


def _delete_with_emptied_parents(
    tensordict: TensorDictBase, keys: list[NestedKey]
) -> TensorDictBase:
    """Delete ``keys`` in place, then the nested tensordicts left empty (deepest first).

    A locked tensordict (a batched env's shared buffer) is not modified: a copy without
    those entries is returned instead.
    """
    if tensordict.is_locked:
        tensordict = tensordict.exclude(*keys)
    else:
        for key in keys:
            tensordict.del_(key)
    parents = {
        key[:depth] for key in keys if isinstance(key, tuple) for depth in range(1, len(key))
    }
    for parent in sorted(parents, key=len, reverse=True):
        value = tensordict.get(parent, None)
        if value is not None and is_tensor_collection(value) and value.is_empty():
            if tensordict.is_locked:
                tensordict = tensordict.exclude(parent)
            else:
                tensordict.del_(parent)
    return tensordict


class Stack(Transform):
    """Stacks tensors and tensordicts.

    The forward stacks ``in_keys`` into ``out_key``; the inverse splits ``in_key_inv``
    back into ``out_keys_inv``.

    Args:
        in_keys (sequence of NestedKey): entries to stack.
        out_key (NestedKey): the stacked entry.
        in_key_inv (NestedKey, optional): the stacked entry split by the inverse.
            Defaults to ``None`` (no inverse).
        out_keys_inv (sequence of NestedKey, optional): the entries written by the
            inverse. Defaults to ``None``.
        dim (int, optional): the (negative) stack dim. Defaults to ``-1``.
        allow_positive_dim (bool, optional): accept ``dim >= 0``. Defaults to ``False``.

    Keyword Args:
        del_keys (bool, optional): remove the inputs. Defaults to ``True``.

    Raises:
        ValueError: if ``dim`` is non-negative without ``allow_positive_dim``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = Stack(["a", "b"], "ab", in_key_inv="ab", out_keys_inv=["a", "b"])
        >>> t(TensorDict({"a": torch.zeros(2), "b": torch.ones(2)}))["ab"].shape
        torch.Size([2, 2])
        >>> sorted(t.inv(TensorDict({"ab": torch.zeros(2, 2)})).keys())
        ['a', 'b']
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_key: NestedKey,
        in_key_inv: NestedKey | None = None,
        out_keys_inv: KeyArg = None,
        dim: int = -1,
        allow_positive_dim: bool = False,
        *,
        del_keys: bool = True,
    ) -> None:
        super().__init__(in_keys)
        self._out_keys = key_list(out_key, owner="Stack", name="out_key")
        self.in_key_inv = in_key_inv
        self._in_keys_inv = [in_key_inv] if in_key_inv is not None else []
        self._out_keys_inv = key_list(out_keys_inv, owner="Stack", name="out_keys_inv")
        self.out_key = out_key
        self.dim = _check_dim("Stack", dim, allow_positive_dim)
        self.del_keys = del_keys

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        values = []
        for key in self._in_keys:
            value = next_tensordict.get(key, None)
            if value is None:
                if self._missing_tolerance:
                    return next_tensordict
                raise missing_key_error("Stack", key, next_tensordict, "in_keys")
            values.append(value)
        next_tensordict.set(self.out_key, torch.stack(values, self.dim))
        if self.del_keys:
            next_tensordict = _delete_with_emptied_parents(next_tensordict, self._in_keys)
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.in_key_inv is None:
            return tensordict
        value = tensordict.get(self.in_key_inv, None)
        if value is None:
            raise missing_key_error("Stack", self.in_key_inv, tensordict, "in_key_inv")
        for key, part in zip(self._out_keys_inv, value.unbind(self.dim)):
            tensordict.set(key, part)
        return tensordict.exclude(self.in_key_inv) if self.del_keys else tensordict

    def _stack_specs(self, spec: Composite, keys: list[NestedKey], out: NestedKey) -> Composite:
        leaves = [spec_get(spec, k) for k in keys]
        if not leaves or any(leaf is None for leaf in leaves):
            return spec
        first = leaves[0]
        stacked = map_spec(first, lambda t: torch.stack([t] * len(keys), self.dim))
        if self.del_keys:
            for key in keys:
                del spec[key]
        spec[out] = stacked
        return spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._stack_specs(observation_spec, self._in_keys, self.out_key)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        if self.in_key_inv is None:
            return action_spec
        return self._stack_specs(action_spec, self._out_keys_inv, self.in_key_inv)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        if self.in_key_inv is None:
            return state_spec
        return self._stack_specs(state_spec, self._out_keys_inv, self.in_key_inv)
