"""``Tokenizer``: text entries to token ids (and back) through a ``transformers`` tokenizer."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rl_specs import Composite, NonTensor, TensorSpec, Unbounded
from rl_transforms._backends import TEXT, require
from rl_transforms._base import Transform
from rl_transforms._key_lists import KeyArg

_TOKENIZER_METHODS = ("encode", "decode", "batch_decode", "__call__")


def _mask_key(key: NestedKey) -> NestedKey:
    """The attention mask's key: ``key`` with its last name replaced by ``"attention_mask"``."""
    return "attention_mask" if isinstance(key, str) else (*key[:-1], "attention_mask")


class Tokenizer(Transform):
    """Applies a tokenization operation on the specified inputs.

    Text at ``in_keys`` (a string, or a stack of strings in a batch) becomes token
    ids (int64) at ``out_keys``, with the attention mask beside them
    (``<out_key parent>/attention_mask``) when ``return_attention_mask``. The
    inverse decodes ids at ``out_keys_inv`` back to text at ``in_keys_inv``.

    Args:
        in_keys (sequence of NestedKey, optional): the text entries. Defaults to ``[]``.
        out_keys (sequence of NestedKey, optional): the token entries. Defaults to ``in_keys``.
        in_keys_inv (sequence of NestedKey, optional): where decoded text goes. Defaults to ``[]``.
        out_keys_inv (sequence of NestedKey, optional): the token entries decoded.
            Defaults to ``in_keys_inv``.

    Keyword Args:
        tokenizer (transformers.PreTrainedTokenizerBase or str): the tokenizer, or a name
            or local folder for ``transformers.AutoTokenizer.from_pretrained``. Any object
            with ``__call__``, ``encode``, ``decode`` and ``batch_decode`` works.
        use_raw_nontensor (bool, optional): give the tokenizer non-tensor data as stored.
            Defaults to ``False``.
        additional_tokens (list of str, optional): tokens added to the vocabulary.
            Defaults to ``None``.
        skip_special_tokens (bool, optional): drop special tokens when decoding.
            Defaults to ``True``.
        add_special_tokens (bool, optional): add special tokens when encoding.
            Defaults to ``False``.
        padding (bool, optional): pad a batch of texts to its longest. Defaults to ``True``.
        max_length (int, optional): pad (and truncate) to this length. Defaults to ``None``.
        return_attention_mask (bool, optional): write the attention mask. Defaults to ``True``.
        missing_tolerance (bool, optional): skip missing entries. Defaults to ``True``.
        call_before_reset (bool, optional): kept for API compatibility; the reset output
            is tokenized either way. Defaults to ``False``.

    Raises:
        TypeError: if no tokenizer is given or it lacks the tokenizer interface.
        ImportError: if a tokenizer name is given and transformers is not installed.

    Examples:
        >>> from tensordict import TensorDict
        >>> class Chars:  # any object with the transformers tokenizer interface
        ...     def __call__(self, texts, return_tensors=None, **kwargs):
        ...         ids = [[ord(c) for c in t] for t in texts]
        ...         width = max(map(len, ids))
        ...         ids = torch.tensor([row + [0] * (width - len(row)) for row in ids])
        ...         return {"input_ids": ids, "attention_mask": (ids != 0).long()}
        ...     def encode(self, text, return_tensors=None, **kwargs):
        ...         return torch.tensor([[ord(c) for c in text]])
        ...     def decode(self, ids, **kwargs):
        ...         return "".join(chr(i) for i in ids.tolist() if i)
        ...     def batch_decode(self, ids, **kwargs):
        ...         return [self.decode(row) for row in ids]
        >>> t = Tokenizer(["text"], ["tokens"], ["text"], ["tokens"], tokenizer=Chars())
        >>> out = t(TensorDict({"text": "hi"}))
        >>> out["tokens"], out["attention_mask"]
        (tensor([104, 105]), tensor([1, 1]))
        >>> t.inv(TensorDict({"tokens": torch.tensor([111, 107])}))["text"]
        'ok'
    """

    def __init__(
        self,
        in_keys: KeyArg = None,
        out_keys: KeyArg = None,
        in_keys_inv: KeyArg = None,
        out_keys_inv: KeyArg = None,
        *,
        tokenizer: Any = None,  # Any: a transformers tokenizer or a duck-typed one
        use_raw_nontensor: bool = False,
        additional_tokens: list[str] | None = None,
        skip_special_tokens: bool = True,
        add_special_tokens: bool = False,
        padding: bool = True,
        max_length: int | None = None,
        return_attention_mask: bool = True,
        missing_tolerance: bool = True,
        call_before_reset: bool = False,
    ) -> None:
        if tokenizer is None:
            raise TypeError(
                "Tokenizer expected a tokenizer (a transformers tokenizer object, or a name or "
                "folder for AutoTokenizer.from_pretrained), got None. Pass tokenizer=..."
            )
        if isinstance(tokenizer, str):
            transformers = require("transformers", owner="Tokenizer", extra=TEXT)
            tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer)
        missing = [m for m in _TOKENIZER_METHODS if not callable(getattr(tokenizer, m, None))]
        if missing:
            raise TypeError(
                f"Tokenizer expected a tokenizer with the transformers interface "
                f"({', '.join(_TOKENIZER_METHODS)}), got {type(tokenizer).__name__} lacking "
                f"{missing}. Wrap it, or use transformers.PreTrainedTokenizerFast."
            )
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        if additional_tokens:
            tokenizer.add_tokens(additional_tokens)
        self.tokenizer = tokenizer
        self.use_raw_nontensor = use_raw_nontensor
        self.skip_special_tokens = skip_special_tokens
        self.add_special_tokens = add_special_tokens
        self.padding = padding
        self.max_length = max_length
        self.return_attention_mask = return_attention_mask
        self.call_before_reset = call_before_reset
        self.set_missing_tolerance(missing_tolerance)

    def call_tokenizer_fn(self, value: str | list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids and attention mask of one text (``[L]``) or a list of texts (``[B, L]``)."""
        kwargs: dict[str, Any] = {"add_special_tokens": self.add_special_tokens}
        if self.max_length is not None:
            kwargs.update(padding="max_length", max_length=self.max_length, truncation=True)
        if isinstance(value, str):
            ids = self.tokenizer.encode(value, return_tensors="pt", **kwargs)[0]
            return ids, torch.ones_like(ids)
        kwargs.setdefault("padding", self.padding)
        out = self.tokenizer(list(value), return_tensors="pt", return_attention_mask=True, **kwargs)
        return out["input_ids"], out["attention_mask"]

    def call_tokenizer_inv_fn(self, value: torch.Tensor) -> str | list[str]:
        """Decode ``[L]`` ids to a string or ``[B, L]`` ids to a list of strings."""
        decode = self.tokenizer.decode if value.ndim == 1 else self.tokenizer.batch_decode
        return decode(value.long(), skip_special_tokens=self.skip_special_tokens)

    def _text(self, value: Any) -> Any:  # Any: non-tensor data or python strings
        if self.use_raw_nontensor:
            return value
        if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):
            return value.tolist()
        return getattr(value, "data", value)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self.missing_tolerance:
                    continue
                raise KeyError(
                    f"Tokenizer expected text at {in_key!r}; available entries: "
                    f"{sorted(str(k) for k in next_tensordict.keys(True, True))}."
                )
            ids, mask = self.call_tokenizer_fn(self._text(value))
            next_tensordict.set(out_key, ids)
            if self.return_attention_mask:
                next_tensordict.set(_mask_key(out_key), mask)
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            ids = tensordict.get(out_key, None)
            if ids is None:
                continue
            tensordict.set_non_tensor(in_key, self.call_tokenizer_inv_fn(ids))
        return tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        shape = observation_spec.shape
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if observation_spec.get(in_key) is None:
                continue
            ids = Unbounded(shape=(*shape, -1), dtype=torch.int64, device=observation_spec.device)
            observation_spec[out_key] = ids
            if self.return_attention_mask:
                observation_spec[_mask_key(out_key)] = ids.clone()
        return observation_spec

    def _transform_inv_spec(self, spec: TensorSpec) -> TensorSpec:
        return NonTensor(shape=spec.shape[: -1 or None], device=spec.device)
