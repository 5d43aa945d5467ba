"""tensordict's private API, all of it, for rl-batched-envs.

The collectors' in-place path calls a policy once per step. A plain
``TensorDictModule`` call (dispatch, key parsing, output checks, a tensordict built
and filled) costs several times a CartPole step, while what it computes is
``module(*inputs)`` written to ``out_keys``. :func:`bare_module` says when calling the
wrapped module directly is exactly that, reading the options ``TensorDictModule``
keeps in private attributes; it falls back (returns ``None``) for anything it does
not recognise, so a tensordict release that renames them only costs speed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict.nn import TensorDictModule

__all__ = ["bare_module"]


def bare_module(policy: object) -> Callable | None:
    """The module a plain ``TensorDictModule`` wraps, when calling it on the inputs is all
    the wrapper does; ``None`` otherwise (a subclass, keyword or method inputs, getter
    options, hooks on the wrapper)."""
    if type(policy) is not TensorDictModule:
        return None
    # private: in_keys given as a {kwarg: key} mapping (the module is then called
    # with keywords), and options for reading the inputs (padding of lazy stacks)
    if getattr(policy, "_kwargs", ()) is not None or getattr(policy, "_get_kwargs", None) != {}:
        return None
    if policy.method is not None or policy.method_kwargs:
        return None
    if policy._forward_hooks or policy._forward_pre_hooks:  # torch.nn.Module's, on the wrapper
        return None
    module = policy.module
    return module if isinstance(module, torch.nn.Module) or callable(module) else None
