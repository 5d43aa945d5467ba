"""The chain of transforms (:class:`Compose`) and callables turned into transforms."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rl_specs import Composite
from rl_transforms._base import TDCallable, Transform
from rl_transforms._key_lists import writable


class _CallableTransform(Transform):
    """Wrap a plain ``td -> td`` callable so it runs as a transform."""

    def __init__(self, fn: TDCallable) -> None:
        super().__init__()
        self.fn = fn

    def set_container(self, container: Any) -> None:  # Any: a Compose or a TransformedEnv
        super().set_container(container)
        attach = getattr(self.fn, "set_container", None)
        if attach is not None:  # transform-like modules (DreamerDecoder) reach the env through us
            attach(self)

    @property
    def base_env(self) -> Any:  # Any: the innermost env of the parent chain
        """The env at the bottom of this transform's parent chain (``None`` when detached)."""
        parent = self.parent
        return None if parent is None else getattr(parent, "base_env", parent)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.fn(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self.fn(tensordict_reset)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fn={self.fn!r})"


def as_transform(obj: Transform | TDCallable) -> Transform:
    """Return ``obj`` when it is a :class:`Transform`, else wrap the callable.

    Raises:
        TypeError: if ``obj`` is neither a transform nor callable.
    """
    if isinstance(obj, Transform):
        return obj
    if callable(obj):
        return _CallableTransform(obj)
    raise TypeError(
        f"Expected a Transform or a callable tensordict -> tensordict, got "
        f"{type(obj).__name__}. Wrap the operation in a function or a Transform subclass."
    )


class Compose(Transform):
    """Composes a chain of transforms.

    Forward calls run the transforms in order; inverse calls in reverse order. Any
    ``td -> td`` callable may be given in place of a transform.

    Args:
        *transforms (Transform or callable): the transforms, innermost first.

    Keyword Args:
        transforms (sequence of Transform, optional): the same transforms given as one
            list instead (not together with positional ones). Defaults to ``None``.

    Raises:
        TypeError: if transforms are given both positionally and as ``transforms=``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_transforms import RewardScaling, RewardClipping
        >>> t = Compose(RewardScaling(loc=0.0, scale=10.0), RewardClipping(-1.0, 1.0))
        >>> t(TensorDict({"reward": torch.tensor([0.05, 0.5])}))["reward"]
        tensor([0.5000, 1.0000])
        >>> len(t), isinstance(t[1:], Compose), t[1:][0] is t[1]
        (2, True, False)
        >>> len(Compose(transforms=[RewardScaling(loc=0.0, scale=2.0)]))
        1
    """

    def __init__(
        self, *transforms_: Transform | TDCallable, transforms: Sequence[Transform] | None = None
    ) -> None:
        super().__init__()
        if transforms is not None and transforms_:
            raise TypeError(
                f"Compose got transforms both positionally ({len(transforms_)}) and as "
                f"transforms=[...] ({len(transforms)}). Pass them one way."
            )
        items = [as_transform(t) for t in (transforms if transforms is not None else transforms_)]
        for t in items:
            t.set_container(self)
        self.transforms = nn.ModuleList(items)
        self.__dict__["_chain"] = tuple(items)

    # ------------------------------------------------------------------ chain
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.__dict__["_chain"]:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.__dict__["_chain"]:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for t in self.__dict__["_chain"]:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in reversed(self.__dict__["_chain"]):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.__dict__["_chain"]:
            tensordict = t(tensordict)
        return tensordict

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._inv_call(tensordict.copy())

    def _has_inverse(self) -> bool:
        return any(t._has_inverse() for t in self.transforms)

    def _inv_writes_input(self) -> bool:
        return any(t._inv_writes_input() for t in self.transforms)

    def dump(self, **kwargs: Any) -> None:  # Any: recorder options (suffix, step)
        """Call ``dump`` on every transform of the chain (recorders write their data)."""
        for t in self.transforms:
            t.dump(**kwargs)

    def set_missing_tolerance(self, mode: bool = False) -> None:
        super().set_missing_tolerance(mode)
        for t in self.transforms:
            t.set_missing_tolerance(mode)

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec = writable(output_spec)
        for t in self.transforms:
            output_spec = t.transform_output_spec(output_spec)
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec = writable(input_spec)
        for t in self.transforms:
            input_spec = t.transform_input_spec(input_spec)
        return input_spec

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        for t in self.transforms:
            device = t.transform_env_device(device)
        return device

    def _chain_spec(self, hook: str, spec: Composite) -> Composite:
        for t in self.transforms:
            spec = getattr(t, hook)(spec)
        return spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._chain_spec("transform_observation_spec", observation_spec)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._chain_spec("transform_reward_spec", reward_spec)

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        return self._chain_spec("transform_done_spec", done_spec)

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        return self._chain_spec("transform_action_spec", action_spec)

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        return self._chain_spec("transform_state_spec", state_spec)

    # ------------------------------------------------------------------ container
    def _parent_of(self, child: Transform, tail: Sequence[Transform]) -> Any:  # Any: TransformedEnv
        container = self.__dict__["_container"]
        if container is None:
            return None
        index = self._index_of(child)
        return container._parent_of(self, [*self.transforms[:index], *tail])

    def _index_of(self, child: Transform) -> int:
        for i, t in enumerate(self.transforms):
            if t is child:
                return i
        raise ValueError(f"{type(child).__name__} is not part of this Compose.")

    def _clear_cache(self) -> None:
        super()._clear_cache()
        for t in self.__dict__.get("_modules", {}).get("transforms", ()):
            t._clear_cache()

    def _notify(self) -> None:
        self._clear_cache()
        container = self.__dict__["_container"]
        if container is not None:
            container._container_changed()

    def _container_changed(self) -> None:
        self._notify()

    def _give_up_children(self) -> list[Transform]:
        """Empty the chain and return what it held (they move to another chain)."""
        children = list(self.transforms)
        self.transforms = nn.ModuleList()
        self.__dict__["_chain"] = ()
        return children

    def append(self, transform: Transform | TDCallable) -> None:
        """Add ``transform`` at the end of the chain (outermost).

        A plain ``Compose`` is added transform by transform (its children join this
        chain, so ``chain[i]`` indexes them), as TorchRL's ``append`` does.

        Raises:
            ValueError: if ``transform`` already has a parent.
        """
        transform = as_transform(transform)
        if type(transform) is Compose:
            for child in transform._give_up_children():
                self.append(child)
            return
        transform.set_container(self)
        self.transforms.append(transform)
        self.__dict__["_chain"] = tuple(self.transforms)
        self._notify()

    def insert(self, index: int, transform: Transform | TDCallable) -> None:
        """Insert ``transform`` at position ``index`` (negative indices allowed).

        Raises:
            ValueError: if ``transform`` already has a parent.
            IndexError: if ``index`` is out of range.
        """
        transform = as_transform(transform)
        size = len(self.transforms)
        if not -size <= index <= size:
            raise IndexError(
                f"Compose.insert expected an index in [{-size}, {size}] for a chain of "
                f"{size} transforms, got {index}."
            )
        transform.set_container(self)
        items = list(self.transforms)
        items.insert(index, transform)
        self.transforms = nn.ModuleList(items)
        self.__dict__["_chain"] = tuple(items)
        self._notify()

    def __getitem__(self, item: int | slice | Sequence[int]) -> Transform:
        if isinstance(item, int):
            return self.transforms[item]
        if isinstance(item, slice):
            return Compose(*[t.clone() for t in self.transforms[item]])
        return Compose(*[self.transforms[i].clone() for i in item])

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.transforms)

    def __len__(self) -> int:
        return len(self.transforms)

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(t) for t in self.transforms)
        return f"Compose(\n    {inner})" if inner else "Compose()"
