"""Tokenizer: bad tokenizers are refused with a clear error (no backend needed)."""

from __future__ import annotations

import sys

import pytest

from rl_transforms import Tokenizer


class TestTokenizer:
    def test_missing_tokenizer_is_reported(self):
        with pytest.raises(TypeError, match="got None"):
            Tokenizer(["text"], ["tokens"])

    def test_object_without_the_interface_is_reported(self):
        with pytest.raises(TypeError, match=r"lacking \['encode', 'decode', 'batch_decode'\]"):
            Tokenizer(["text"], ["tokens"], tokenizer=lambda text: text)

    def test_tokenizer_name_without_transformers_names_the_extra(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "transformers", None)
        with pytest.raises(ImportError, match=r"rl-transforms\[text\]"):
            Tokenizer(["text"], ["tokens"], tokenizer="bert-base-uncased")
