"""``LLMHashingEnv``: token-by-token text generation where each chain has a hash."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDict, TensorDictBase

from rl_envs_core._env_base import EnvBase
from rl_specs import Categorical, Composite, NonTensor, Unbounded

__all__ = ["LLMHashingEnv"]

_MULTIPLIER = 0x100000001B3  # 64-bit FNV prime, a good odd multiplier for mixing
_OFFSET = -3750763034362895579  # the 64-bit FNV offset basis, as a signed int64


class _TokenChainHash(torch.nn.Module):
    """Hash each token chain (the last dim of an int tensor) to one ``int64``.

    A multiply-xor fold over the tokens (FNV-1a on whole tokens, wrapping in
    64 bits): equal chains give equal hashes and chains that differ by any token,
    their order or their length almost surely differ.
    """

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens.long()
        out = torch.full(tokens.shape[:-1], _OFFSET, dtype=torch.int64, device=tokens.device)
        for token in tokens.unbind(-1):
            out = (out ^ token) * _MULTIPLIER
        return out


class LLMHashingEnv(EnvBase):
    """A text generation environment that uses a hashing module to identify unique observations.

    The observation is a chain of tokens; each action is one more token, appended
    to the chain. Next to the chain, the ``"hashing"`` entry holds one ``int64``
    hash of it, so that chains can be identified (in a tree or a map) by that
    number alone. When a tokenizer is given, the decoded text is also written at
    ``text_key``. The environment never terminates: bound rollouts with
    ``max_steps``. It is batch-unlocked; the batch is the one of the prompt given to
    :meth:`reset` (see :meth:`make_tensordict`); ``reset()`` without a prompt starts
    from an empty chain.

    Args:
        vocab_size (int, optional): the size of the vocabulary. Can be omitted when
            the tokenizer has a ``vocab_size`` attribute. Defaults to ``None``.

    Keyword Args:
        hashing_module (Callable[[torch.Tensor], torch.Tensor], optional): maps an
            integer tensor ``[*B, L]`` to its hashes ``[*B]``. Defaults to a built-in
            64-bit FNV-1a hash over the tokens.
        observation_key (NestedKey, optional): where the tokens live. Defaults to
            ``"observation"``.
        text_output (bool, optional): whether to write the decoded text. Defaults to
            ``True`` (it then needs a tokenizer).
        tokenizer (callable, optional): a tokenizer-like object: calling it on a
            string (or a list of strings) gives its token ids (a tensor, a list or a
            mapping with ``"input_ids"``), ``decode(ids)`` gives the text of one
            chain and, optionally, ``batch_decode(ids)`` that of a batch. Defaults to
            ``None``.
        text_key (NestedKey, optional): where the text is written. Defaults to
            ``"text"``.

    Raises:
        TypeError: if neither ``vocab_size`` nor a tokenizer with ``vocab_size`` is given.
        ValueError: if ``text_output`` is on without a tokenizer.

    Examples:
        >>> class CharTokenizer:
        ...     vocab_size = 128
        ...     def __call__(self, text):
        ...         return torch.tensor([ord(c) for c in text])
        ...     def decode(self, ids):
        ...         return "".join(chr(i) for i in ids.tolist())
        >>> env = LLMHashingEnv(tokenizer=CharTokenizer())
        >>> td = env.make_tensordict("Hi")
        >>> print(td["text"], td["hashing"].shape)
        Hi torch.Size([1])
        >>> td["action"] = torch.tensor([ord("!")])
        >>> print(env.step(td)["next", "text"])
        Hi!
    """

    batch_locked = False

    def __init__(
        self,
        vocab_size: int | None = None,
        *,
        hashing_module: Callable[[torch.Tensor], torch.Tensor] | None = None,
        observation_key: NestedKey = "observation",
        text_output: bool = True,
        tokenizer: Any = None,  # Any: any tokenizer-like object (see the docstring)
        text_key: NestedKey | None = "text",
    ) -> None:
        super().__init__()
        if vocab_size is None:
            vocab_size = getattr(tokenizer, "vocab_size", None)
            if vocab_size is None:
                raise TypeError(
                    f"LLMHashingEnv needs the vocabulary size: got vocab_size=None and a "
                    f"tokenizer without vocab_size ({type(tokenizer).__name__}). Pass "
                    f"vocab_size=<int>."
                )
        if text_output and tokenizer is None:
            raise ValueError(
                "LLMHashingEnv(text_output=True) needs a tokenizer to decode the tokens, got "
                "tokenizer=None. Pass tokenizer=... or text_output=False."
            )
        self.vocab_size = int(vocab_size)
        self._hashing_module = hashing_module if hashing_module is not None else _TokenChainHash()
        self._tokenizer = tokenizer
        self.observation_key = observation_key
        self.text_output = text_output
        self.text_key = (text_key if text_key is not None else "text") if text_output else None
        observations: dict[NestedKey, Any] = {
            observation_key: Categorical(n=self.vocab_size, shape=(-1,)),
            "hashing": Unbounded(shape=(1,), dtype=torch.int64),
        }
        if self.text_key is not None:
            observations[self.text_key] = NonTensor(shape=(), example_data="")
        self.observation_spec = Composite(observations)
        self.state_spec = Composite({observation_key: Categorical(n=self.vocab_size, shape=(-1,))})
        self.full_action_spec = Composite(action=Categorical(self.vocab_size, shape=(1,)))
        self.reward_spec = Unbounded(shape=(1,))

    def make_tensordict(self, input: str | list[str]) -> TensorDictBase:
        """Tokenize ``input`` and reset the environment on it.

        Args:
            input (str or list of str): the prompt; a list gives a batch of prompts,
                which the tokenizer must return as one ``[B, L]`` tensor.

        Returns:
            The output of :meth:`reset` on the tokenized prompt.

        Raises:
            RuntimeError: if the environment has no tokenizer.
        """
        if self._tokenizer is None:
            raise RuntimeError(
                "LLMHashingEnv.make_tensordict needs a tokenizer, but this env was built "
                "without one. Build it with tokenizer=... or reset it on a tensordict of "
                f"token ids at {self.observation_key!r}."
            )
        ids = self._tokenizer(input)
        if isinstance(ids, Mapping):
            ids = ids["input_ids"]
        ids = torch.as_tensor(ids, dtype=torch.int64, device=self.device)
        batch = [len(input)] if isinstance(input, list) else []
        return self.reset(TensorDict({self.observation_key: ids}, batch_size=batch))

    def _describe(self, tokens: torch.Tensor, out: TensorDictBase) -> TensorDictBase:
        """Write the hash (and the text) of ``tokens`` into ``out``."""
        out.set("hashing", self._hashing_module(tokens).unsqueeze(-1))
        if self.text_key is not None:
            if tokens.ndim > 1:
                decode = getattr(self._tokenizer, "batch_decode", None)
                flat = tokens.reshape(-1, tokens.shape[-1])
                texts = decode(flat) if decode is not None else [self._tokenizer.decode(t) for t in flat]
                text = NonTensorStack.from_list(list(texts)).reshape(tokens.shape[:-1])
            else:
                text = NonTensorData(self._tokenizer.decode(tokens))
            out.set(self.text_key, text)
        return out

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        batch_size = self.batch_size if tensordict is None else tensordict.batch_size
        tokens = None if tensordict is None else tensordict.get(self.observation_key, None)
        if tokens is None:
            # no prompt: every chain starts empty
            tokens = torch.zeros((*batch_size, 0), dtype=torch.int64, device=self.device)
        out = TensorDict({self.observation_key: tokens}, batch_size=batch_size)
        done = torch.zeros((*batch_size, 1), dtype=torch.bool, device=tokens.device)
        out.update({"done": done, "terminated": done.clone()})
        return self._describe(tokens, out)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        tokens = tensordict.get(self.observation_key)
        action = tensordict.get("action")
        if (
            action.is_floating_point()
            or action.dtype == torch.bool
            or action.shape != (*tensordict.batch_size, 1)
        ):
            raise ValueError(
                f"LLMHashingEnv expected 'action' as one integer token per chain, shape "
                f"{[*tensordict.batch_size, 1]}, got dtype={action.dtype}, shape="
                f"{list(action.shape)}. Write token ids with shape [*batch, 1] (e.g. "
                f"ids.long().unsqueeze(-1))."
            )
        if bool(((action < 0) | (action >= self.vocab_size)).any()):
            raise ValueError(
                f"LLMHashingEnv expected token ids in [0, {self.vocab_size}), got "
                f"{action.flatten().tolist()}. Sample actions from env.action_spec or "
                f"build the env with a larger vocab_size."
            )
        chain = torch.cat([tokens, action.to(tokens.dtype)], -1)
        done = torch.zeros((*tensordict.batch_size, 1), dtype=torch.bool, device=chain.device)
        out = TensorDict(
            {
                self.observation_key: chain,
                "reward": torch.zeros(done.shape, device=chain.device),
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=tensordict.batch_size,
        )
        return self._describe(chain, out)

    def _set_seed(self, seed: int | None) -> None:
        # the dynamics are deterministic: there is nothing to seed
        return None
