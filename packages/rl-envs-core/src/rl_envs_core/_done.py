"""Done completion: every done entry an env declares gets a value, once.

A lone ``done`` or ``terminated`` stands for both (see
:func:`~rl_envs_core._spec_views.done_dual`); step outputs are completed with the
twin, reset outputs also zero-filled; a reset that returns a set done flag is an
error unless the env allows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_envs_core import _partial
from rl_envs_core._spec_views import done_dual
from rl_envs_core._step_mdp import as_tuple
from rl_envs_core._td import entries, get_entry, has_entries, set_entry

if TYPE_CHECKING:
    from rl_envs_core._env_base import EnvBase


def complete_done(env: EnvBase, out: TensorDictBase, *, fill_zeros: bool) -> list[NestedKey]:
    """Flank a lone done/terminated with its dual; zero-fill the rest if asked.

    Returns the keys holding zeros written here (directly or as the clone of a
    zero-filled dual): they need no "done right after a reset" check.
    """
    filled: list[NestedKey] = []
    names = (env.__dict__["_cache"] or env._key_cache())["done_names"]
    if names is not None and has_entries(out, names):
        return filled  # the common case: every done entry is a top-level name already there
    present = entries(out) if type(out) is TensorDict else out.keys()
    extra = out.batch_size[: out.batch_dims - len(env.batch_size)]
    for key, leaf in env._done_leaf_specs():
        if key in present if isinstance(key, str) else out.get(key, None) is not None:
            continue
        dual_key = done_dual(key)
        value = get_entry(out, dual_key) if dual_key is not None else None
        if value is not None:
            set_entry(out, key, value.clone())
            if dual_key in filled:
                filled.append(key)
        elif fill_zeros:
            set_entry(out, key, leaf.zero(torch.Size(extra)) if extra else leaf.zero())
            filled.append(key)
    return filled


def check_not_done(
    env: EnvBase, out: TensorDictBase, resets: dict, skip: list[NestedKey] = ()
) -> None:
    """Raise if a done flag is set right after a reset (where the reset applied)."""
    for key in env._key_cache()["done_keys"]:
        if key in skip:  # zero-filled by complete_done: not done by construction
            continue
        done = out.get(key, None)
        if done is None:
            continue
        tup = as_tuple(key)
        mask = resets.get(()) if () in resets else resets.get(tup[:-1])
        if mask is not None:
            done = done & _partial.fit_mask(mask, done.shape, key)
        if bool(done.any()):
            raise RuntimeError(
                f"{type(env).__name__} returned done=True at {key!r} right after a "
                f"reset. Return done=False from _reset, or build the env with "
                f"allow_done_after_reset=True if this is intended."
            )
