"""``Hash``: hashes of entries written to other entries, with an optional inverse look-up."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_specs import TensorSpec, Unbounded
from rl_transforms._elementwise import UnaryTransform
from rl_transforms._key_lists import KeyArg
from rl_transforms._tensor_text import tensor_text


def _repertoire_key(value: Any) -> Any:  # Any: a hash tensor, list or number
    """A hashable key for a hash value (nested tuples of python numbers)."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, list):
        return tuple(_repertoire_key(v) for v in value)
    return value


class Hash(UnaryTransform):
    """Adds a hash value to a tensordict.

    ``hash_fn(value)`` (or ``hash_fn(value, seed)`` when a seed is given) is written
    from each ``in_key`` to its ``out_key``. Non-tensor data (strings) are unwrapped
    before hashing unless ``use_raw_nontensor=True``. With a ``repertoire`` (or
    inverse keys), every hash is remembered with its input, and the inverse
    transform writes the input back from a hash.

    Args:
        in_keys (sequence of NestedKey): the entries hashed.
        out_keys (sequence of NestedKey): where the hashes go.
        in_keys_inv (sequence of NestedKey, optional): where the inverse writes the
            inputs. Defaults to ``None``.
        out_keys_inv (sequence of NestedKey, optional): the hashes the inverse reads.
            Defaults to ``in_keys_inv``.

    Keyword Args:
        hash_fn (callable, optional): ``(value[, seed]) -> Tensor``. Defaults to
            :meth:`reproducible_hash` (SHA-256 of the string, 32 uint8).
        seed (optional): passed to ``hash_fn`` when given. Defaults to ``None``.
        use_raw_nontensor (bool, optional): give ``hash_fn`` non-tensor data as stored.
            Defaults to ``False``.
        repertoire (dict, optional): hash -> input map filled by the forward calls and
            read by the inverse (shared, not copied). Defaults to a new dict when inverse
            keys are given, else ``None``.

    Raises:
        TypeError: if ``hash_fn`` is not callable or returns no tensor.

    Examples:
        >>> from tensordict import TensorDict
        >>> t = Hash(in_keys=["text"], out_keys=["hash"])
        >>> out = t(TensorDict({"text": "hello"}))
        >>> out["hash"].shape, out["hash"].dtype
        (torch.Size([32]), torch.uint8)
        >>> bool((out["hash"] == Hash.reproducible_hash("hello")).all())
        True
        >>> inverse = Hash(["text"], ["hash"], in_keys_inv=["text"], out_keys_inv=["hash"])
        >>> hashed = inverse(TensorDict({"text": "abc"}))
        >>> inverse.inv(TensorDict({"hash": hashed["hash"]}))["text"]
        'abc'
    """

    def __init__(
        self,
        in_keys: KeyArg,
        out_keys: KeyArg,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        *,
        hash_fn: Callable[..., torch.Tensor] | None = None,
        seed: Any | None = None,  # Any: whatever hash_fn takes as a seed
        use_raw_nontensor: bool = False,
        repertoire: dict[Any, Any] | None = None,  # Any: hash keys -> inputs
    ) -> None:
        hash_fn = Hash.reproducible_hash if hash_fn is None else hash_fn
        if not callable(hash_fn):
            raise TypeError(f"Hash expected a callable hash_fn, got {type(hash_fn).__name__}.")
        if repertoire is None and in_keys_inv:
            repertoire = {}
        super().__init__(
            in_keys,
            out_keys,
            in_keys_inv,
            out_keys_inv,
            fn=self.call_hash_fn,
            inv_fn=self.get_input_from_hash,
            use_raw_nontensor=use_raw_nontensor,
        )
        self._hash_fn = hash_fn
        self._seed = seed
        self._repertoire = repertoire

    @staticmethod
    def reproducible_hash(string: str | None, seed: str | None = None) -> torch.Tensor:
        """The SHA-256 digest of ``seed + string`` as a ``[32]`` uint8 tensor.

        ``None`` hashes as the empty string; any other value as its ``str``.

        Examples:
            >>> Hash.reproducible_hash("a")[:4]
            tensor([202, 151, 129,  18], dtype=torch.uint8)
        """
        if string is None:
            text = ""
        elif isinstance(string, torch.Tensor):
            text = tensor_text(string)  # str(string), built without torch's printing machinery
        else:
            text = str(string)
        if seed is not None:
            text = f"{seed}{text}"
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return torch.frombuffer(bytearray(digest), dtype=torch.uint8)

    def _apply_transform(self, obs: Any) -> Any:  # Any: a tensor or non-tensor data
        if isinstance(obs, torch.Tensor):  # first: a tensor's .data property builds a new alias
            return self.fn(obs)
        if not self.use_raw_nontensor and hasattr(obs, "tolist"):
            obs = obs.tolist()  # a NonTensorStack: its python values
        elif not self.use_raw_nontensor and hasattr(obs, "data"):
            obs = obs.data
        return self.fn(obs)

    def call_hash_fn(self, value: Any) -> torch.Tensor:  # Any: the hashed value
        """Hash ``value`` (with the seed when one was given) and remember it in the repertoire.

        Raises:
            TypeError: if ``hash_fn`` returns no tensor.
        """
        out = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if not isinstance(out, torch.Tensor):
            raise TypeError(
                f"Hash expected hash_fn to return a torch.Tensor, got {type(out).__name__} for "
                f"input {value!r}. Wrap the result in torch.tensor(...)."
            )
        if self._repertoire is not None:
            self._repertoire[_repertoire_key(out)] = value
        return out

    def get_input_from_hash(self, hash_tensor: torch.Tensor) -> Any:  # Any: the hashed input
        """Look up the input that was given for a particular hash output.

        Raises:
            RuntimeError: if the transform keeps no repertoire.
            KeyError: if the hash was never produced.
        """
        if self._repertoire is None:
            raise RuntimeError(
                "Hash keeps no repertoire, so it cannot map hashes back to inputs. Build it "
                "with in_keys_inv/out_keys_inv or repertoire={}."
            )
        key = _repertoire_key(hash_tensor)
        if key not in self._repertoire:
            raise KeyError(
                f"Hash found no input for the hash {hash_tensor!r}: it was never produced by "
                f"this transform ({len(self._repertoire)} hashes known)."
            )
        return self._repertoire[key]

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = tensordict.get(out_key, None)
            if value is None:
                continue
            original = self.get_input_from_hash(value)
            if isinstance(original, torch.Tensor):
                tensordict.set(in_key, original)
            else:
                tensordict.set_non_tensor(in_key, original)
        return tensordict

    def _has_inverse(self) -> bool:
        # the inverse only writes inputs back at in_keys_inv: without them a step needs
        # neither the inverse pass nor the copy of its input that TransformedEnv makes for it
        return bool(self.in_keys_inv)

    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        # hash_fn sees the whole (batched) value, so its output shape is the spec's shape
        repertoire, self._repertoire = self._repertoire, None  # a probe is not an input
        try:
            probe = self._apply_transform(spec.zero())
        finally:
            self._repertoire = repertoire
        return Unbounded(shape=probe.shape, dtype=probe.dtype, device=spec.device)

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        return spec.clone()
