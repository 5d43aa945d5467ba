"""Entry selection and naming: :class:`RenameTransform`, :class:`SelectTransform`,
:class:`ExcludeTransform` and :class:`RemoveEmptySpecs`."""

from __future__ import annotations

from tensordict import NestedKey, TensorDictBase, is_tensor_collection

from rl_specs import Composite
from rl_transforms._base import Transform
from rl_transforms._key_lists import (
    KeyArg,
    key_list,
    map_leaf_specs,
    missing_key_error,
    spec_del,
    spec_get,
)


class RenameTransform(Transform):
    """A transform to rename entries in the output tensordict (or input tensordict via the inverse keys).

    Args:
        in_keys (sequence of NestedKey): the base env's names.
        out_keys (sequence of NestedKey): the names seen by the policy.
        in_keys_inv (sequence of NestedKey, optional): the base env's names of inputs
            (e.g. actions). Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): the policy's names of those
            inputs. Defaults to ``in_keys_inv``.
        create_copy (bool, optional): keep the original entries as well. Defaults to ``False``.

    Raises:
        ValueError: if paired key lists differ in length.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = RenameTransform(["a"], ["b"], in_keys_inv=["act"], out_keys_inv=["my_act"])
        >>> sorted(t(TensorDict({"a": torch.zeros(1)})).keys())
        ['b']
        >>> sorted(t.inv(TensorDict({"my_act": torch.zeros(1)})).keys())
        ['act']
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_keys: KeyArg,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        create_copy: bool = False,
    ) -> None:
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        self.create_copy = create_copy

    def _move(
        self,
        tensordict: TensorDictBase,
        sources: list[NestedKey],
        targets: list[NestedKey],
        role: str,
    ) -> TensorDictBase:
        for source, target in zip(sources, targets):
            value = tensordict.get(source, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise missing_key_error("RenameTransform", source, tensordict, role)
            tensordict.set(target, value)
            if not self.create_copy and source != target:
                tensordict.del_(source)
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._move(next_tensordict, self._in_keys, self._out_keys, "in_keys")

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._move(tensordict, self._out_keys_inv, self._in_keys_inv, "out_keys_inv")

    def _rename_specs(self, spec: Composite) -> Composite:
        for in_key, out_key in zip(self._in_keys, self._out_keys):
            leaf = spec_get(spec, in_key)
            if leaf is None:
                continue
            spec[out_key] = leaf.clone()
            if not self.create_copy and in_key != out_key:
                del spec[in_key]
        return spec

    transform_observation_spec = _rename_specs
    transform_reward_spec = _rename_specs
    transform_done_spec = _rename_specs

    def _rename_inv_specs(self, spec: Composite) -> Composite:
        # with create_copy the policy sees (and may write) both names
        return map_leaf_specs(
            spec,
            self._in_keys_inv,
            self._out_keys_inv,
            lambda leaf: leaf.clone(),
            drop_in=not self.create_copy,
        )

    transform_action_spec = _rename_inv_specs
    transform_state_spec = _rename_inv_specs


def _reward_and_done_keys(output_spec: Composite, role: str) -> list[NestedKey]:
    return list(output_spec[role].keys(True, True))


class SelectTransform(Transform):
    """Select keys from the input tensordict.

    Args:
        *selected_keys (NestedKey): the entries kept.

    Keyword Args:
        keep_rewards (bool, optional): keep the reward entries too. Defaults to ``True``.
        keep_dones (bool, optional): keep the done entries too. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SelectTransform("a")
        >>> sorted(t(TensorDict({"a": torch.zeros(1), "b": torch.zeros(1), "reward": torch.zeros(1)})).keys())
        ['a', 'reward']
    """

    def __init__(
        self, *selected_keys: NestedKey, keep_rewards: bool = True, keep_dones: bool = True
    ) -> None:
        super().__init__()
        self.selected_keys = key_list(
            list(selected_keys), owner="SelectTransform", name="selected_keys"
        )
        self.keep_rewards = keep_rewards
        self.keep_dones = keep_dones

    def _kept(self) -> list[NestedKey]:
        kept = self._lazy.get("kept")
        if kept is None:
            kept = list(self.selected_keys)
            if self.keep_rewards:
                kept += self._lazy.get("reward_keys", ["reward"])
            if self.keep_dones:
                kept += self._lazy.get("done_keys", ["done", "terminated", "truncated"])
            self._lazy["kept"] = kept
        return kept

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.select(*self._kept(), "_reset", strict=False)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._lazy["reward_keys"] = _reward_and_done_keys(output_spec, "full_reward_spec")
        self._lazy["done_keys"] = _reward_and_done_keys(output_spec, "full_done_spec")
        self._lazy.pop("kept", None)
        kept = {(k,) if isinstance(k, str) else k for k in self._kept()}
        for role in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            spec = output_spec[role]
            for key in list(spec.keys(True, True)):
                if ((key,) if isinstance(key, str) else key) not in kept:
                    del spec[key]
        return output_spec


class ExcludeTransform(Transform):
    """Excludes keys from the data.

    Args:
        *excluded_keys (NestedKey): the entries removed.

    Keyword Args:
        inverse (bool, optional): remove them from the step input (inverse path) instead
            of the output. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ExcludeTransform("b")
        >>> sorted(t(TensorDict({"a": torch.zeros(1), "b": torch.zeros(1)})).keys())
        ['a']
    """

    def __init__(self, *excluded_keys: NestedKey, inverse: bool = False) -> None:
        super().__init__()
        self.excluded_keys = key_list(
            list(excluded_keys), owner="ExcludeTransform", name="excluded_keys"
        )
        self.inverse = inverse

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return next_tensordict
        return next_tensordict.exclude(*self.excluded_keys)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.inverse:
            return tensordict
        return tensordict.exclude(*self.excluded_keys)

    def _has_inverse(self) -> bool:
        return self.inverse

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if not self.inverse:
            for role in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
                for key in self.excluded_keys:
                    spec_del(output_spec[role], key)
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if self.inverse:
            for key in self.excluded_keys:
                spec_del(input_spec["full_state_spec"], key)
        return input_spec


def _empty_keys(spec: Composite, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Keys of nested composites that hold no leaf (deepest first)."""
    found = []
    for name in list(spec.keys()):
        sub = spec[name]
        if isinstance(sub, Composite):
            found += _empty_keys(sub, (*prefix, name))
            if sub.is_empty(recurse=True):
                found.append((*prefix, name))
    return found


def _drop_empty(td: TensorDictBase) -> TensorDictBase:
    for key in list(td.keys()):
        value = td.get(key)
        if is_tensor_collection(value) and not isinstance(value, type(None)):
            _drop_empty(value)
            if value.is_empty():
                td.del_(key)
    return td


class RemoveEmptySpecs(Transform):
    """Removes empty specs and content from an environment.

    Nested composites without any leaf are removed from the specs, and empty nested
    tensordicts from the data. On the inverse path (inside an env), the empty state
    composites the base env declares are put back as empty tensordicts.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "empty": TensorDict()})
        >>> sorted(RemoveEmptySpecs()(td).keys())
        ['a']
    """

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return _drop_empty(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return _drop_empty(tensordict_reset)

    def _prune(self, spec: Composite) -> Composite:
        for key in _empty_keys(spec):
            spec_del(spec, key)
        return spec

    transform_observation_spec = _prune
    transform_reward_spec = _prune
    transform_done_spec = _prune

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # the base env may expect its empty state composites back: remember them
        self._lazy["empty_state"] = [key for key in _empty_keys(state_spec)]
        return self._prune(state_spec)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Put back the empty state composites the base env declares (in an env only)."""
        for key in reversed(self._lazy.get("empty_state", ())):  # outermost first
            if tensordict.get(key, None) is None:
                tensordict.set(key, tensordict.empty())
        return tensordict
