"""Multi-step returns over TED batches: :class:`MultiStep` and the function it runs.

For each step ``t`` of a TED batch (time is the last batch dim), the window of the
n-step return runs from ``t`` to ``end(t) = min(t + n_steps - 1, first done at or
after t, last step of the batch)``.  The reward becomes the discounted sum of the
window's rewards, every other ``"next"`` entry (except the done entries) is read at
``end(t)``, and three entries describe the window: ``steps_to_next_obs``
(``end(t) - t + 1``), ``gamma`` (``gamma ** steps_to_next_obs``) and
``nonterminal`` (the new next state is not terminal and the step is valid).

The window ends are found with one reverse cumulative minimum and the sums with
``n_steps`` shifted additions, so the cost grows with ``n_steps * numel`` and not
with the number of trajectories in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_replay._leaves import as_tuple, leaf_keys

__all__ = ["DEFAULT_DONE_KEYS", "MultiStep", "multi_step"]

DEFAULT_DONE_KEYS: tuple[str, ...] = ("done", "terminated", "truncated")
NEXT = "next"


_as_tuple = as_tuple


def _next(key: NestedKey) -> tuple[str, ...]:
    return (NEXT, *_as_tuple(key))


class MultiStep(nn.Module):
    """Multistep reward transform.

    Rewrites a TED batch (``[*batch, time]``, time being the last batch dim) so
    that each step carries its n-step return: the ``("next", "reward")`` entry
    becomes the discounted sum of the rewards of the next ``n_steps`` steps (fewer
    where a trajectory ends or the batch stops), and the other ``"next"`` entries
    are those of the last step of that window. Done entries are left untouched.

    The output also holds ``("next", "original_reward")`` (the reward before the
    transform), ``"steps_to_next_obs"`` (how many steps the window spans),
    ``"gamma"`` (``gamma ** steps_to_next_obs``, the discount of the bootstrap
    value) and ``"nonterminal"`` (``False`` where the new next state is terminal
    -- ``("next", "terminated")``, or ``("next", "done")`` when there is no
    terminated entry -- or where the ``("collector", "mask")`` entry marks the
    step invalid). These three have the done's shape without its trailing
    singleton dim.

    The done entry may have the batch shape, the batch shape plus a trailing
    singleton dim, or the batch shape followed by more dims (one done per agent,
    say), in which case every entry must have those leading dims too.

    Args:
        gamma (float): the discount factor, in ``(0, 1]``.
        n_steps (int): how many steps each return spans at most (``1`` leaves the
            data unchanged apart from the added entries).

    Raises:
        ValueError: if ``gamma`` is out of ``(0, 1]`` or ``n_steps`` is not a
            positive integer.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = torch.arange(6.0)
        >>> done = torch.tensor([False, False, True, False, False])
        >>> data = TensorDict(
        ...     {"obs": obs[:-1], "next": {"obs": obs[1:], "done": done,
        ...      "reward": torch.ones(5)}}, batch_size=[5])
        >>> out = MultiStep(gamma=0.5, n_steps=2)(data)
        >>> out["next", "obs"]
        tensor([2., 3., 3., 5., 5.])
        >>> out["next", "reward"]
        tensor([1.5000, 1.5000, 1.0000, 1.5000, 1.0000])
        >>> out["steps_to_next_obs"]
        tensor([2, 2, 1, 2, 1])
        >>> out["nonterminal"]
        tensor([ True, False, False,  True,  True])
    """

    def __init__(self, gamma: float, n_steps: int) -> None:
        super().__init__()
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps <= 0:
            raise ValueError(
                f"MultiStep expected n_steps to be a positive integer, got n_steps={n_steps!r}. "
                "Pass the number of steps each return spans (1 or more)."
            )
        if not 0 < gamma <= 1:
            raise ValueError(
                f"MultiStep expected gamma in (0, 1], got gamma={gamma!r}. Pass a discount factor "
                "such as 0.99."
            )
        self.gamma = gamma
        self.n_steps = n_steps
        self.done_key: NestedKey = "done"
        self.done_keys: list[NestedKey] = list(DEFAULT_DONE_KEYS)
        self.reward_keys: list[NestedKey] = ["reward"]
        self.mask_key: NestedKey | None = ("collector", "mask")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns a copy of ``tensordict`` (leaves shared where unchanged) with n-step returns.

        Args:
            tensordict (TensorDictBase): a TED batch whose last batch dim is time,
                with ``("next", "reward")`` and ``("next", "done")`` entries.

        Returns:
            the rewritten tensordict.
        """
        return multi_step(
            tensordict,
            gamma=self.gamma,
            n_steps=self.n_steps,
            done_key=self.done_key,
            done_keys=self.done_keys,
            reward_keys=self.reward_keys,
            mask_key=self.mask_key,
        )

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, n_steps={self.n_steps}"


def multi_step(
    tensordict: TensorDictBase,
    *,
    gamma: float,
    n_steps: int,
    done_key: NestedKey = "done",
    done_keys: Sequence[NestedKey] = DEFAULT_DONE_KEYS,
    reward_keys: Sequence[NestedKey] = ("reward",),
    mask_key: NestedKey | None = ("collector", "mask"),
    original_reward_suffix: str | None = None,
) -> TensorDictBase:
    """Applies the n-step rewrite of :class:`MultiStep` to ``tensordict`` (not in place).

    ``original_reward_suffix=None`` stores the original reward of the first reward
    key under ``("next", "original_reward")``; a suffix stores each reward key ``k``
    under ``("next", k + suffix)`` instead (the replay-buffer transform's layout).
    """
    if tensordict.batch_dims == 0:
        raise ValueError(
            "MultiStep expected a tensordict with a time dim (the last batch dim), got batch_size=[]. "
            "Pass a TED batch such as env.rollout(...) output."
        )
    done = _get_entry(tensordict, _next(done_key))
    ndim = tensordict.batch_dims
    batch_shape = tensordict.batch_size
    if done.shape[:ndim] != batch_shape:
        raise RuntimeError(
            f"MultiStep: the tensordict shape must be compatible with the done's shape: "
            f"expected the done entry {_next(done_key)} to start with the batch shape "
            f"{list(batch_shape)}, got {list(done.shape)}. Give the tensordict the done's leading shape."
        )
    # the done's trailing dims (beyond a singleton) are extra batch dims of the transform
    extra = done.shape[ndim:]
    if len(extra) == 1 and extra[0] == 1:
        extra = torch.Size([])
    if extra:
        _check_leading_dims(tensordict, batch_shape + extra)
    time_dim = ndim - 1
    work_shape = batch_shape + extra
    done_flat = done.reshape(work_shape)
    # bring time last for the window computations
    done_t = done_flat.movedim(time_dim, -1)
    T = done_t.shape[-1]
    ar = torch.arange(T, device=done.device)
    ends = torch.where(done_t, ar, torch.full_like(ar, T - 1))
    ends = ends.flip(-1).cummin(-1).values.flip(-1)
    ends = torch.minimum(ends, ar + (n_steps - 1))
    time_to_obs = ends - ar  # in [0, n_steps - 1]

    out = tensordict.copy()
    steps_t = time_to_obs.movedim(-1, time_dim)
    steps = steps_t
    reward_keys = [_as_tuple(k) for k in reward_keys]
    for i, rkey in enumerate(reward_keys):
        reward = _get_entry(tensordict, _next(rkey))
        summed = _discounted_window_sum(reward, steps_t, time_dim, n_steps, gamma)
        if original_reward_suffix is None:
            if i == 0:
                out.set((NEXT, "original_reward"), reward)
        else:
            out.set((NEXT, *rkey[:-1], rkey[-1] + original_reward_suffix), reward)
        out.set(_next(rkey), summed)

    skip = {_next(k) for k in reward_keys} | {_next(k) for k in done_keys}
    if n_steps > 1:
        gather_idx = (ar + time_to_obs).movedim(-1, time_dim)
        for key in leaf_keys(tensordict):
            if key[0] != NEXT or key in skip:
                continue
            value = tensordict.get(key)
            if not isinstance(value, torch.Tensor) or value.is_nested:
                value = _gather_non_tensor(tensordict, key, gather_idx, time_dim, ndim)
                out.set(key, value)
                continue
            out.set(key, _gather_time(value, gather_idx, time_dim))

    steps_to_next_obs = steps + 1
    out.set("steps_to_next_obs", steps_to_next_obs)
    out.set("gamma", gamma**steps_to_next_obs)
    terminal_key = (
        _next("terminated") if _next("terminated") in _leaf_set(tensordict) else _next(done_key)
    )
    terminal = _get_entry(tensordict, terminal_key).reshape(work_shape).movedim(time_dim, -1)
    nonterminal = ~torch.gather(terminal, -1, ends)
    if mask_key is not None and _as_tuple(mask_key) in _leaf_set(tensordict):
        mask = tensordict.get(mask_key).reshape(batch_shape)
        mask = mask.reshape(mask.shape + (1,) * len(extra)).expand(work_shape)
        nonterminal = nonterminal & mask.movedim(time_dim, -1)
    out.set("nonterminal", nonterminal.movedim(-1, time_dim))
    return out


def _leaf_set(tensordict: TensorDictBase) -> set[tuple[str, ...]]:
    return set(leaf_keys(tensordict))


def _get_entry(tensordict: TensorDictBase, key: tuple[str, ...]) -> torch.Tensor:
    if key not in _leaf_set(tensordict):
        raise KeyError(
            f"MultiStep expected an entry {key} in the TED batch; found only "
            f"{sorted(_leaf_set(tensordict))}. Add it or set the transform's keys."
        )
    return tensordict.get(key)


def _check_leading_dims(tensordict: TensorDictBase, shape: torch.Size) -> None:
    for key, value in tensordict.items(include_nested=True, leaves_only=True):
        if isinstance(value, torch.Tensor) and value.shape[: len(shape)] != shape:
            raise RuntimeError(
                f"MultiStep: the tensordict shape must be compatible with the done's shape "
                f"{list(shape)} (trailing singleton excluded), but entry {key!r} has shape "
                f"{list(value.shape)}. Give every entry the done's leading dims."
            )


def _expand_right(index: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return index.reshape(index.shape + (1,) * (len(shape) - index.ndim)).expand(shape)


def _gather_time(value: torch.Tensor, index: torch.Tensor, time_dim: int) -> torch.Tensor:
    return torch.gather(value, time_dim, _expand_right(index, value.shape))


def _gather_non_tensor(
    tensordict: TensorDictBase, key: tuple[str, ...], index: torch.Tensor, time_dim: int, ndim: int
) -> object:
    """Gathers a non-tensor leaf (strings, nested tensors) by indexing the tensordict."""
    # dims past the batch (one done per agent) share the time index of their first element
    index = index[(...,) + (0,) * (index.ndim - ndim)] if index.ndim > ndim else index
    grids = list(torch.meshgrid(*[torch.arange(s) for s in index.shape], indexing="ij"))
    grids[time_dim] = index
    return tensordict.select(key)[tuple(grids)].get(key)


def _discounted_window_sum(
    reward: torch.Tensor, steps: torch.Tensor, time_dim: int, n_steps: int, gamma: float
) -> torch.Tensor:
    """``sum_{k <= steps[t]} gamma**k * reward[t + k]`` along ``time_dim``."""
    T = reward.shape[time_dim]
    steps = _expand_right(steps, reward.shape)
    summed = reward.clone()
    for k in range(1, min(n_steps, T)):
        shifted = reward.narrow(time_dim, k, T - k)
        part = summed.narrow(time_dim, 0, T - k)
        valid = steps.narrow(time_dim, 0, T - k) >= k
        part.add_(torch.where(valid, shifted, torch.zeros((), dtype=reward.dtype)) * (gamma**k))
    return summed
