"""Tokenizer with a real tokenizer built in the test (tokenizers, through transformers)."""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorData, TensorDict

from rl_envs_core import EnvBase
from rl_specs import Categorical, Composite, NonTensor, Unbounded
from rl_transforms import Tokenizer, TransformedEnv

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

WORDS = ["[PAD]", "[UNK]", "the", "cat", "sat", "on", "mat", "dog"]


@pytest.fixture
def tokenizer():
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]")
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]"
    )


class TextEnv(EnvBase):
    """Says 'the cat sat' then 'the dog', forever."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(text=NonTensor(shape=()))
        self.action_spec = Categorical(2, shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))
        self.add_truncated_keys()
        self.count = 0

    def _out(self):
        done = torch.zeros(1, dtype=torch.bool)
        text = "the cat sat" if self.count % 2 == 0 else "the dog"
        flags = {"done": done, "terminated": done.clone(), "truncated": done.clone()}
        return TensorDict({"text": NonTensorData(text), **flags})

    def _reset(self, tensordict=None, **kwargs):
        self.count = 0
        return self._out()

    def _step(self, tensordict):
        self.count += 1
        return self._out().set("reward", torch.zeros(1))

    def _set_seed(self, seed):
        return None


class TestTokenizerWithTransformers:
    def test_one_text_becomes_its_ids(self, tokenizer):
        out = Tokenizer(["text"], ["ids"], tokenizer=tokenizer)(
            TensorDict({"text": "the cat sat on the mat"})
        )
        assert out["ids"].tolist() == [2, 3, 4, 5, 2, 6]
        assert out["attention_mask"].tolist() == [1] * 6

    def test_a_batch_is_padded_with_its_mask(self, tokenizer):
        texts = torch.stack([NonTensorData("the dog"), NonTensorData("the cat sat")])
        out = Tokenizer(["text"], ["ids"], tokenizer=tokenizer)(TensorDict({"text": texts}, [2]))
        assert out["ids"].tolist() == [[2, 7, 0], [2, 3, 4]]
        assert out["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]

    def test_max_length_pads_and_truncates(self, tokenizer):
        t = Tokenizer(["text"], ["ids"], tokenizer=tokenizer, max_length=4)
        texts = torch.stack([NonTensorData("the dog"), NonTensorData("the cat sat on the mat")])
        assert t(TensorDict({"text": texts}, [2]))["ids"].shape == (2, 4)

    def test_unknown_words_and_additional_tokens(self, tokenizer):
        t = Tokenizer(["text"], ["ids"], tokenizer=tokenizer, additional_tokens=["bird"])
        ids = t(TensorDict({"text": "the bird flew"}))["ids"].tolist()
        assert ids == [2, len(WORDS), 1]

    def test_inverse_decodes_ids_to_text(self, tokenizer):
        t = Tokenizer(in_keys_inv=["text"], out_keys_inv=["ids"], tokenizer=tokenizer)
        out = t.inv(TensorDict({"ids": torch.tensor([[2, 3, 0], [2, 7, 0]])}, [2]))
        assert out["text"] == ["the cat", "the dog"]

    def test_in_an_env(self, tokenizer):
        env = TransformedEnv(TextEnv(), Tokenizer(["text"], ["ids"], tokenizer=tokenizer))
        assert env.observation_spec["ids"].dtype == torch.int64
        data = env.rollout(3, return_contiguous=False)  # ids vary in length
        assert data[0]["ids"].tolist() == [2, 3, 4]
        assert data[1]["ids"].tolist() == [2, 7]
