"""LLMHashingEnv with a tiny character tokenizer."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import step_mdp
from rl_envs_core._native._llm_hashing import LLMHashingEnv, _TokenChainHash
from rl_envs_core.testing import EnvContract


class CharTokenizer:
    """Token ids are character codes: enough to exercise the tokenizer protocol."""

    vocab_size = 128

    def __call__(self, text):
        if isinstance(text, list):
            return {"input_ids": torch.tensor([[ord(c) for c in t] for t in text])}
        return torch.tensor([ord(c) for c in text])

    def decode(self, ids):
        return "".join(chr(i) for i in ids.tolist())


class BatchCharTokenizer(CharTokenizer):
    def batch_decode(self, ids):
        return ["|".join(chr(i) for i in row.tolist()) for row in ids]


def _append(env, td, char):
    td["action"] = torch.full((*td.batch_size, 1), ord(char))
    return env.step(td)


class TestLLMHashingEnv(EnvContract):
    def make_env(self):
        return LLMHashingEnv(tokenizer=CharTokenizer())

    # The chains grow by one token per step (a -1 dim in the spec), so rollouts ask for
    # a lazy stack: the two contract checks below compare them step by step.
    def test_rollout_has_time_dim(self):
        data = self.make_env().rollout(4, return_contiguous=False)
        assert data.names[-1] == "time" and data.batch_size == torch.Size([4])
        for t in range(3):
            assert torch.equal(data[t + 1]["observation"], data[t]["next", "observation"])
            assert data[t + 1]["text"] == data[t]["next", "text"]

    def test_seeding_is_deterministic(self):
        runs = []
        for _ in range(2):
            env = self.make_env()
            torch.manual_seed(0)
            env.set_seed(0)
            runs.append(env.rollout(4, return_contiguous=False))
        for first, second in zip(runs[0].unbind(0), runs[1].unbind(0)):
            assert torch.equal(first["next", "observation"], second["next", "observation"])
            assert torch.equal(first["next", "hashing"], second["next", "hashing"])

    def test_make_tensordict_single(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        td = env.make_tensordict("abc")
        assert td["observation"].tolist() == [97, 98, 99]
        assert td["text"] == "abc"
        assert td["hashing"].shape == torch.Size([1]) and td["hashing"].dtype == torch.int64

    @pytest.mark.parametrize(("tokenizer", "texts"), [(CharTokenizer(), ["ab", "cd"]), (BatchCharTokenizer(), ["a|b", "c|d"])])
    def test_make_tensordict_batch(self, tokenizer, texts):
        env = LLMHashingEnv(tokenizer=tokenizer)
        td = env.make_tensordict(["ab", "cd"])
        assert td.batch_size == torch.Size([2])
        assert td["text"] == texts
        assert td["hashing"].shape == torch.Size([2, 1])

    def test_step_appends_token_and_rehashes(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        td = env.make_tensordict("ab")
        out = _append(env, td, "c")["next"]
        assert out["text"] == "abc"
        assert out["observation"].tolist() == [97, 98, 99]
        assert out["hashing"] != td["hashing"]
        assert not out["done"].any() and out["reward"].tolist() == [0.0]

    def test_same_chain_same_hash(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        grown = _append(env, env.make_tensordict("ab"), "c")["next", "hashing"]
        direct = env.make_tensordict("abc")["hashing"]
        assert torch.equal(grown, direct)

    @pytest.mark.parametrize("other", [[1, 2], [2, 1], [1, 2, 0], [0, 1, 2]])
    def test_default_hash_separates_chains(self, other):
        hashing = _TokenChainHash()
        assert hashing(torch.tensor([1, 2, 3])) != hashing(torch.tensor(other))

    def test_custom_hashing_module(self):
        env = LLMHashingEnv(4, hashing_module=lambda t: t.sum(-1), text_output=False)
        td = env.reset(TensorDict(observation=torch.tensor([[1, 2], [3, 3]]), batch_size=[2]))
        assert td["hashing"].tolist() == [[3], [6]]
        assert "text" not in td.keys()

    def test_custom_keys(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer(), observation_key="tokens", text_key="prompt")
        td = env.make_tensordict("hi")
        assert td["prompt"] == "hi" and td["tokens"].tolist() == [104, 105]

    def test_rollout_grows_chain(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        td = env.make_tensordict(["ab", "cd", "ef"])
        data = env.rollout(4, tensordict=td, auto_reset=False, return_contiguous=False)
        assert data.batch_size == torch.Size([3, 4])
        assert data[0, -1]["next", "observation"].shape == torch.Size([6])
        last = step_mdp(data[:, -1])
        assert last["observation"].shape == torch.Size([3, 6])

    def test_reset_without_prompt_starts_empty(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        td = env.reset()
        assert td["observation"].shape == torch.Size([0]) and td["text"] == ""
        assert _append(env, td, "a")["next", "text"] == "a"

    def test_specs(self):
        env = LLMHashingEnv(tokenizer=CharTokenizer())
        assert env.batch_locked is False
        assert env.full_action_spec["action"].n == 128
        assert env.full_action_spec["action"].shape == torch.Size([1])
        assert set(env.observation_spec.keys()) == {"observation", "hashing", "text"}


class TestLLMHashingEnvErrors:
    def test_no_vocab_size(self):
        with pytest.raises(TypeError, match=r"vocabulary size.*vocab_size=<int>"):
            LLMHashingEnv(text_output=False)

    def test_text_output_without_tokenizer(self):
        with pytest.raises(ValueError, match=r"needs a tokenizer.*text_output=False"):
            LLMHashingEnv(10)

    def test_make_tensordict_without_tokenizer(self):
        with pytest.raises(RuntimeError, match=r"needs a tokenizer"):
            LLMHashingEnv(10, text_output=False).make_tensordict("a")

    @pytest.mark.parametrize(
        "action", [torch.tensor([1.0]), torch.tensor(1), torch.tensor([[1]])], ids=["float", "scalar", "extra-dim"]
    )
    def test_bad_action(self, action):
        env = LLMHashingEnv(10, text_output=False)
        td = env.reset(TensorDict(observation=torch.tensor([1, 2])))
        td["action"] = action
        with pytest.raises(ValueError, match=r"one integer token per chain, shape \[1\]"):
            env._step(td)

    def test_token_out_of_vocabulary(self):
        env = LLMHashingEnv(10, text_output=False)
        td = env.reset(TensorDict(observation=torch.tensor([1, 2])))
        td["action"] = torch.tensor([10])
        with pytest.raises(ValueError, match=r"token ids in \[0, 10\), got \[10\]"):
            env._step(td)
