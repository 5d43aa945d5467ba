"""Errors that are both the type our conventions ask for and the type TorchRL raises.

Code written against ``torchrl.data`` catches ``AssertionError`` around ``assert_is_in``
and ``RuntimeError`` around ``torch.stack`` of specs and ``encode``; these classes keep
such code working while still being the ``ValueError`` / ``TypeError`` that a bad value or
a bad type is here. They stay private: catch the public base classes.
"""

from __future__ import annotations


class _NotInSpecError(ValueError, AssertionError):
    """A value outside its spec (shape or domain), from ``assert_is_in``."""


class _NotInSpecTypeError(TypeError, AssertionError):
    """A value of the wrong type or dtype for its spec, from ``assert_is_in``."""


class _MismatchError(ValueError, RuntimeError):
    """Specs ``torch.stack`` cannot stack, or a value ``encode`` cannot give the spec's shape."""
