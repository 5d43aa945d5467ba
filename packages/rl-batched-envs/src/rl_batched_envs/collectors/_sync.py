"""``SyncDataCollector``: batches of TED data from one env, collected in this process.

Random batches (``policy=None`` or the first ``init_random_frames``) of an env with
a ``buffered_stepper`` (gym, EnvPool, ``SerialEnv`` / ``ParallelEnv`` of those) are
written in place: the batch is preallocated from the specs, every action drawn at
once, the env's stepper writes each step into the batch, the roots are filled by
one copy per entry and the trajectory ids come from the done flags (see
``rl_envs_core.extension.BufferedRollout``). Otherwise, the general path below.

The general path: each step only calls the policy (or writes a view of a batch of
random draws), steps the env with ``step_and_maybe_reset`` (batched envs reset
their done sub-envs in the same call, all at once) and appends the step's tensors
to one list per entry. At the end of a batch every entry is stacked straight into
its output tensor (``torch.stack(..., out=)`` into preallocated storage when a
caller hands one in, as the process workers do with their shared-memory batch):
no per-step tensordict is built by the collector, no tensordict is stacked, and
the policy sees the running root tensordict itself. Trajectory ids: one ``[*batch]``
tensor, replaced only when an env finishes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_batched_envs._stacking import EnvFactory
from rl_batched_envs.collectors._base import (
    ENDLESS,
    DataCollectorBase,
    check_options,
    check_total_frames,
    make_env,
    round_frames,
)
from rl_batched_envs.collectors._in_place import PolicyOnViews
from rl_batched_envs.collectors._policy import (
    RandomDraws,
    as_td_policy,
    check_policy_output,
)
from rl_batched_envs.collectors._recorder import StepRecorder
from rl_batched_envs.collectors._split import TRAJ_KEY
from rl_envs_core import EnvBase, ExplorationType, set_exploration_type
from rl_envs_core.extension import BufferedRollout, any_true, get_entry, set_entry

DEFAULT_EXPLORATION_TYPE = ExplorationType.RANDOM


def _device(value: Any) -> torch.device | None:  # Any: int, str or device
    return None if value is None else torch.device(value)


class SyncDataCollector(DataCollectorBase):
    """A generic data collector for RL problems: an iterable of batches of env data.

    Each batch is a TED tensordict of ``frames_per_batch`` frames with the env's
    batch dims first and time last (``[*env.batch_size, frames_per_batch //
    env.batch_size.numel()]``), holding the root data, ``"next"`` and the
    trajectory ids ``("collector", "traj_ids")`` (unique across resets and, in the
    multi-process collectors, across workers). The envs keep running between
    batches: a trajectory continues in the next batch unless
    ``reset_at_each_iter=True``.

    Args:
        create_env_fn (EnvBase or callable): the env, or a callable building it.
        policy (callable, optional): the policy. ``None`` draws random actions from
            the env's action spec. A TensorDict-in/TensorDict-out callable (a
            ``TensorDictModule``, ``RandomPolicy``, ``env.rand_step``) reads the
            root tensordict and writes the action(s); a plain callable whose
            parameters are named after root observation keys (``lambda
            observation: ...``) gets those tensors and returns the action (a tuple
            for several action keys). Defaults to ``None``.

    Keyword Args:
        frames_per_batch (int): frames per batch. Rounded up to a multiple of the
            env's batch numel (with a ``UserWarning``), since every env steps the
            same number of times.
        total_frames (int): frames to collect in all; ``-1`` collects until the
            loop stops. The last batch may overshoot. Defaults to ``-1``.
        device (torch.device, optional): fills whichever of ``storing_device``,
            ``env_device`` and ``policy_device`` is not given. Defaults to ``None``.
        storing_device (torch.device, optional): device of the yielded batches.
            Defaults to ``None`` (where the env's data is).
        env_device (torch.device, optional): device the env is moved to. Defaults
            to ``None`` (unchanged).
        policy_device (torch.device, optional): device the policy is moved to; its
            inputs are moved there and its actions back. Defaults to ``None``.
        create_env_kwargs (dict, optional): kwargs of ``create_env_fn``. Defaults
            to ``None``.
        max_frames_per_traj (int, optional): an env running this many steps is
            marked truncated (``("next", "truncated")`` and ``("next", "done")``
            set) and reset; an env without a ``"truncated"`` entry gets one
            (``env.add_truncated_keys()``). ``None`` or a value <= 0 means no limit.
            Defaults to ``None``.
        init_random_frames (int, optional): the first frames are collected with
            random actions, whatever the policy; rounded up to whole batches.
            Defaults to ``None``.
        reset_at_each_iter (bool, optional): reset every env at the start of each
            batch. Defaults to ``False``.
        postproc (callable, optional): applied to each batch (e.g. ``MultiStep``).
            Defaults to ``None``.
        split_trajs (bool, optional): yield ``[n_traj, max_len]`` zero-padded
            trajectories with a ``("collector", "mask")`` entry instead of
            ``[*batch, time]``. Defaults to ``False``.
        exploration_type (ExplorationType, optional): the exploration mode set
            while the policy runs. Defaults to ``ExplorationType.RANDOM``.
        replay_buffer (ReplayBuffer, optional): each batch (after ``postproc``) is
            written with ``replay_buffer.extend`` and the iteration yields ``None``.
            Any object with ``extend`` works. Defaults to ``None``.
        trust_policy (bool, optional): skip the check of the policy's first output
            against the action spec. Defaults to ``False``.
        track_traj_ids (bool, optional): write ``("collector", "traj_ids")``.
            Defaults to ``True``.
        set_truncated (bool, optional): mark the last step of every batch truncated
            (needs a ``"truncated"`` entry). Defaults to ``False``.
        **kwargs: TorchRL options without effect here (``use_buffers``,
            ``return_same_td``, ``compile_policy``, ...); anything else is refused.

    Raises:
        TypeError: an unknown keyword argument.
        ValueError: bad ``frames_per_batch`` / ``total_frames``; at the first batch, a
            policy action of the wrong shape, or a replay buffer too small for a batch.
        KeyError: at the first batch, a policy output without the action key.
        TypeError: at the first batch, a policy action of the wrong dtype.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> collector = SyncDataCollector(
        ...     CountingEnv(max_steps=3), None, frames_per_batch=5, total_frames=10)
        >>> for data in collector:
        ...     print(data.batch_size, data["collector", "traj_ids"].tolist())
        torch.Size([5]) [0, 0, 0, 1, 1]
        torch.Size([5]) [1, 2, 2, 2, 3]
        >>> collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn: EnvBase | EnvFactory,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = ENDLESS,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = None,
        exploration_type: ExplorationType = DEFAULT_EXPLORATION_TYPE,
        replay_buffer: Any = None,  # Any: duck-typed, anything with extend()
        trust_policy: bool | None = None,
        track_traj_ids: bool = True,
        set_truncated: bool = False,
        **kwargs: Any,  # Any: TorchRL options without effect here (use_buffers, ...)
    ) -> None:
        owner = type(self).__name__
        check_options(kwargs, owner)
        self._owned_env = not isinstance(create_env_fn, EnvBase)
        env = make_env(create_env_fn, create_env_kwargs)
        self.storing_device = _device(storing_device or device)
        self.env_device = _device(env_device or device)
        self.policy_device = _device(policy_device or device)
        if self.env_device is not None and env.device != self.env_device:
            env = env.to(self.env_device)
        self.env = env
        self.n_env = max(1, env.batch_size.numel())
        self.requested_frames_per_batch = frames_per_batch
        self.frames_per_batch = round_frames(frames_per_batch, self.n_env, owner)
        self.total_frames = check_total_frames(total_frames, owner)
        fpb = self.frames_per_batch
        init = 0 if init_random_frames in (None, -1) else int(init_random_frames)
        self.init_random_frames = -(-init // fpb) * fpb
        self.max_frames_per_traj = (
            int(max_frames_per_traj) if max_frames_per_traj and max_frames_per_traj > 0 else None
        )
        self.reset_at_each_iter = reset_at_each_iter
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        if self.split_trajs and not track_traj_ids:
            raise ValueError(
                "split_trajs=True needs track_traj_ids=True (the ids split the batch)."
            )
        self.exploration_type = exploration_type
        self.replay_buffer = replay_buffer
        if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
            raise TypeError(
                f"replay_buffer must have an extend(tensordict) method, got "
                f"{type(replay_buffer).__name__}."
            )
        self.track_traj_ids = track_traj_ids
        self.set_truncated = set_truncated
        self.trust_policy = bool(trust_policy)
        self.policy = policy
        if (
            policy is not None
            and self.policy_device is not None
            and isinstance(policy, torch.nn.Module)
        ):
            policy.to(self.policy_device)
        self._act, _ = (None, False) if policy is None else as_td_policy(env, policy)
        self._random = RandomDraws(env)
        self._steps = fpb // self.n_env
        self._frames = 0
        self._iter = -1
        self._rb_checked = False
        self._policy_checked = self.trust_policy
        self._carry: TensorDictBase | None = None
        rewards = [key for key in env.reward_keys if key not in env.state_keys]  # not carried on
        self._recorder = StepRecorder(env.batch_size, rewards)
        self._traj_offset, self._traj_stride = 0, 1
        self._next_local_id = 0
        self._traj_ids: torch.Tensor | None = None
        self._carried: list[NestedKey] | None = None
        self._swap = False
        self._last_random: bool | None = None
        self._reset_keys: set = set()
        self._step_count: torch.Tensor | None = None
        self._closed = False
        if self.max_frames_per_traj is not None and "truncated" not in env.done_keys:
            env.add_truncated_keys()  # the step limit is reported as a truncation
        self._on_views: PolicyOnViews | None = None
        self._done_key: NestedKey | None = "done" if "done" in env.done_keys else None
        self._truncated_key = "truncated" if "truncated" in env.done_keys else None

    # ------------------------------------------------------------------ trajectories
    def _set_traj_ids(self, offset: int, stride: int) -> None:
        """Ids ``offset + stride * k``: workers of a multi-process collector never collide."""
        self._traj_offset, self._traj_stride = offset, stride

    def _new_ids(self, count: int) -> torch.Tensor:
        local = torch.arange(self._next_local_id, self._next_local_id + count)
        self._next_local_id += count
        return local * self._traj_stride + self._traj_offset

    def _reset_all(self) -> TensorDictBase:
        env = self.env
        carry = env.reset()
        self._reset_keys = set(carry.keys(True, True))
        batch = env.batch_size
        self._traj_ids = self._new_ids(self.n_env).reshape(batch)
        if self.max_frames_per_traj is not None:
            self._step_count = torch.zeros(batch, dtype=torch.int64)
        return carry

    def _carried_keys(self, nxt: TensorDictBase) -> list[NestedKey]:
        """The ``"next"`` entries that become the next root (all but the rewards)."""
        rewards = {key if isinstance(key, str) else tuple(key) for key in self.env.reward_keys}
        keys = []
        for key in nxt.keys(True, True):
            key = key[0] if isinstance(key, tuple) and len(key) == 1 else key
            if key not in rewards:
                keys.append(key)
        return keys

    def _can_swap(self, nxt: TensorDictBase) -> bool:
        """Whether ``nxt`` can serve as the next root: a plain tensordict with every reset entry."""
        return type(nxt) is TensorDict and self._reset_keys <= set(nxt.keys(True, True))

    def _done_mask(self, nxt: TensorDictBase) -> torch.Tensor:
        """``[*batch]`` flags: which envs ended at this step."""
        batch = self.env.batch_size
        if self._done_key is not None:
            return get_entry(nxt, self._done_key).reshape(*batch, -1).any(-1)
        flags = torch.zeros(batch, dtype=torch.bool)
        for key in self.env.done_keys:
            value = nxt.get(key, None)
            if value is not None:
                flags |= value.reshape(*batch, -1).any(-1)
        return flags

    def _truncate(self, nxt: TensorDictBase, carry: TensorDictBase | None) -> TensorDictBase | None:
        """Mark envs that reached ``max_frames_per_traj`` truncated (in ``nxt``).

        ``carry`` (the next root, already computed by a batched env) is marked too
        and reset where truncated; with ``carry=None`` the caller resets.
        """
        count = self._step_count
        count += 1
        hit = count >= self.max_frames_per_traj
        if not bool(hit.any()):
            return carry
        batch = self.env.batch_size
        for key in (self._truncated_key, self._done_key):
            if key is None:
                continue
            for td in (nxt, carry):
                value = None if td is None else get_entry(td, key)
                if value is None:
                    continue
                value = value.clone()
                value.reshape(*batch, -1)[hit] = True
                set_entry(td, key, value)
        return None if carry is None else self.env.maybe_reset(carry)

    # ------------------------------------------------------------------ collection
    def _policy_step(self, carry: TensorDictBase) -> None:
        act = self._act
        if self.policy_device is not None and carry.device != self.policy_device:
            out = act(carry.to(self.policy_device))
            for key in self.env.action_keys:
                set_entry(carry, key, out.get(key).to(carry.device))
        else:
            out = act(carry)
        if not self._policy_checked:
            check_policy_output(self.env, out, self.policy, self.env.action_keys)
            self._policy_checked = True
        if out is not carry:
            for key in self.env.action_keys:
                set_entry(carry, key, out.get(key))

    @torch.no_grad()
    def rollout(self, out: TensorDictBase | None = None) -> TensorDictBase:
        """Collect one batch (``out``: a preallocated batch to stack into).

        The policy runs without autograd (``torch.no_grad``), as in TorchRL: the
        batch holds no graph.

        Returns:
            the batch, ``[*env.batch_size, time]``.
        """
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} was shut down; build a new one.")
        env, steps, rec = self.env, self._steps, self._recorder
        carry = self._carry
        if carry is None or self.reset_at_each_iter:
            carry = self._reset_all()
        random = self._act is None or self._frames < self.init_random_frames
        draws = self._random
        if random:
            draws.draw(steps)
        if random != self._last_random:  # the policy may write more entries than a draw
            rec.root_keys = None
            self._last_random = random
        batch = self._buffered_batch(carry, out) if random else self._policy_batch(carry, out)
        if batch is not None:
            return self._complete(batch)
        generic = type(env).step_and_maybe_reset is EnvBase.step_and_maybe_reset
        step, env_step, maybe_reset = env.step_and_maybe_reset, env.step, env.maybe_reset
        plain_step, next_of = type(env).step is EnvBase.step, env.next_of
        truncating = self.max_frames_per_traj is not None
        track = self.track_traj_ids
        ids = self._traj_ids
        done_key = self._done_key
        carried, swap = self._carried, self._swap
        rec.start(steps)
        with set_exploration_type(self.exploration_type):
            for t in range(steps):
                if random:
                    draws.write(carry, t)
                else:
                    self._policy_step(carry)
                if generic:
                    if plain_step:  # the documented way to get "next" without writing it
                        data, nxt = carry, next_of(carry)
                    else:
                        data = env_step(carry)
                        nxt = get_entry(data, "next")
                    if carried is None:
                        carried = self._carried = self._carried_keys(nxt)
                        swap = self._swap = self._can_swap(nxt)
                    if truncating:
                        self._truncate(nxt, None)
                    rec.record(data, nxt, ids)
                    if swap:
                        # the env's fresh "next" tensordict is the next root: it
                        # holds every root entry (its reward is never recorded)
                        carry = nxt
                    else:
                        for key in carried:
                            set_entry(carry, key, get_entry(nxt, key))
                else:
                    data, carry = step(carry)
                    nxt = get_entry(data, "next")
                    if truncating:
                        carry = self._truncate(nxt, carry)
                    rec.record(data, nxt, ids)
                flag = get_entry(nxt, done_key) if done_key is not None else None
                if flag is None or truncating or any_true(flag):
                    done = self._done_mask(nxt)
                    if bool(done.any()):
                        if generic:
                            carry = maybe_reset(carry)
                        if track:
                            ids = ids.clone()
                            ids[done] = self._new_ids(int(done.sum()))
                        if truncating:
                            self._step_count[done] = 0
        self._carry, self._traj_ids = carry, ids
        batch = rec.finish(out, TRAJ_KEY if track else None)
        if not random and self._on_views is not None:
            self._on_views.learn(batch)
        return self._complete(batch)

    def _complete(self, batch: TensorDictBase) -> TensorDictBase:
        if self.set_truncated:
            self._mark_last_truncated(batch)
        if self.storing_device is not None and batch.device != self.storing_device:
            batch = batch.to(self.storing_device)
        return batch

    # ------------------------------------------------------------------ fast path
    def _buffered_batch(
        self, carry: TensorDictBase, out: TensorDictBase | None
    ) -> TensorDictBase | None:
        """The batch of random steps written in place by the env's stepper, or ``None``.

        The env's ``buffered_stepper`` (``rl_envs_core.extension``) writes each step
        into the preallocated batch; the batch of random draws is copied in as the
        actions; the trajectory ids come from the done flags at the end. ``None``
        when an option needs the general path (``max_frames_per_traj``, no
        ``"done"`` entry) or the env declines; nothing was stepped then.
        """
        if self.max_frames_per_traj is not None or self._done_key != "done":
            return None
        engine = BufferedRollout.cached(self.env)
        if engine is None:
            return None
        steps, dim = self._steps, len(self.env.batch_size)
        if out is not None:
            if not engine.fits(out, steps):
                return None
            batch = out
        else:
            batch = engine.allocate(steps)
        draws = self._random
        for (key, _), draw in zip(draws.leaves, draws.draws):
            batch.get(key).copy_(draw.movedim(0, dim) if dim else draw)
        following = engine.run(carry, batch)
        if following is None:
            return None
        self._carry = following
        return self._with_ids(batch, out)

    def _policy_batch(
        self, carry: TensorDictBase, out: TensorDictBase | None
    ) -> TensorDictBase | None:
        """The batch of policy steps written in place, or ``None`` (general path).

        The env steps one step at a time through its stepper's per-step mode
        (``BufferedRollout.start``); before each step the policy is called on views
        of the step's root entries and its outputs are copied into the batch (see
        ``_in_place.PolicyOnViews``). ``None`` until a batch of the general path
        showed what the policy writes, and whenever an option, the policy or the
        env needs the general path; nothing was stepped then.
        """
        if self.max_frames_per_traj is not None or self._done_key != "done":
            return None
        if self.policy_device is not None and self.policy_device.type != "cpu":
            return None
        if len(self.env.batch_size) > 1:
            return None  # a step's resets are written by env index: one batch dim at most
        engine = BufferedRollout.cached(self.env)
        if engine is None:
            return None
        plan = self._on_views
        if plan is None or plan.carried != engine.carried:
            plan = self._on_views = PolicyOnViews(self.env, self.policy, engine.carried)
        if not plan.ready:
            return None
        steps = self._steps
        if out is not None:
            if not (engine.fits(out, steps) and plan.fits(out)):
                return None
            batch = out
        else:
            batch = engine.allocate(steps)
            plan.allocate(batch)
        carry = carry.exclude(*plan.outputs)  # the policy's entries of a previous step
        run = engine.start(carry, batch, read=plan.inputs)
        if run is None:
            return None
        with set_exploration_type(self.exploration_type):
            plan.collect(run, batch, steps)
        self._carry = run.following(carry.device)
        return self._with_ids(batch, out)

    def _with_ids(self, batch: TensorDictBase, out: TensorDictBase | None) -> TensorDictBase:
        """``batch`` with its trajectory ids (written into ``out``'s when it is the batch)."""
        if self.track_traj_ids:
            ids = self._ids_of(batch.get(("next", "done")))
            if out is not None:
                out.get(TRAJ_KEY).copy_(ids)
            else:
                batch.set(TRAJ_KEY, ids)
        return batch

    def _ids_of(self, done: torch.Tensor) -> torch.Tensor:
        """``[*batch, T]`` trajectory ids of a batch whose ``("next", "done")`` is ``done``.

        The ids the per-step path gives: a finished env takes a new id from the next
        step on, new ids handed out in order of step, then env. Updates the ids the
        next batch starts from.
        """
        n, steps = self.n_env, self._steps
        ends = done.reshape(n, steps, -1).any(-1).T  # [T, n], time-major: the order of new ids
        current = self._traj_ids.reshape(n)
        count = int(ends.sum())
        table = torch.empty(steps + 1, n, dtype=current.dtype)
        table[0] = current
        starts = torch.zeros(steps + 1, n, dtype=torch.bool)
        starts[0] = True
        if count:
            flat = ends.reshape(-1)
            rank = (flat.cumsum(0) - 1).clamp_(min=0)
            table[1:] = self._new_ids(count)[rank].reshape(steps, n)
            starts[1:] = ends
        rows = torch.arange(steps + 1).unsqueeze(-1)
        latest = torch.where(starts, rows, 0).cummax(0).values
        filled = table.gather(0, latest)
        batch = self.env.batch_size
        self._traj_ids = filled[steps].reshape(batch).clone()
        return filled[:steps].T.reshape(*batch, steps)

    def _mark_last_truncated(self, batch: TensorDictBase) -> None:
        if self._truncated_key is None:
            raise RuntimeError(
                f"set_truncated=True needs a 'truncated' entry in the env's done spec; it has "
                f"{self.env.done_keys}. Call env.add_truncated_keys() first."
            )
        for key in (self._truncated_key, self._done_key):
            if key is not None:
                batch.get(("next", key))[..., -1, :] = True

    def _next_raw(self) -> TensorDictBase:
        return self.rollout()

    # ------------------------------------------------------------------ control
    def reset(self, index: Any = None, **kwargs: Any) -> None:  # Any: TorchRL signature
        """Reset the envs: the next batch starts new trajectories."""
        self._carry = None

    def set_seed(self, seed: int, static_seed: bool = False) -> int | None:
        """Seed the env (and the random draws, through torch); return the next seed.

        Examples:
            >>> from rl_envs_core.testing import CountingEnv
            >>> c = SyncDataCollector(CountingEnv(), None, frames_per_batch=2, total_frames=2)
            >>> isinstance(c.set_seed(0), int)
            True
        """
        out = self.env.set_seed(seed, static_seed=static_seed)
        torch.manual_seed(seed)
        self._carry = None
        return out

    def update_policy_weights_(
        self,
        policy_or_weights: TensorDictBase | torch.nn.Module | dict | None = None,
        **kwargs: Any,  # Any: TorchRL options (worker_ids, ...) without effect here
    ) -> None:
        """Load new weights into the policy (the policy itself is used, so ``None`` is a no-op).

        Args:
            policy_or_weights: a module, a ``state_dict`` or a ``TensorDict`` of
                parameters (``TensorDict.from_module``). Defaults to ``None``.
        """
        if policy_or_weights is None or not isinstance(self.policy, torch.nn.Module):
            return
        if isinstance(policy_or_weights, torch.nn.Module):
            if policy_or_weights is self.policy:
                return
            policy_or_weights = TensorDict.from_module(policy_or_weights)
        if isinstance(policy_or_weights, TensorDictBase):
            policy_or_weights.to_module(self.policy)
        else:
            self.policy.load_state_dict(policy_or_weights)

    def state_dict(self) -> dict[str, Any]:  # Any: nested state
        """The env's and the policy's state, and the frame counters."""
        state: dict[str, Any] = {"collector": self._base_state()}  # Any: nested state
        if isinstance(self.env, torch.nn.Module):
            state["env_state_dict"] = self.env.state_dict()
        if isinstance(self.policy, torch.nn.Module):
            state["policy_state_dict"] = self.policy.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], **kwargs: Any) -> None:  # Any: see above
        """Restore what :meth:`state_dict` returned."""
        if "env_state_dict" in state_dict and isinstance(self.env, torch.nn.Module):
            self.env.load_state_dict(state_dict["env_state_dict"], **kwargs)
        if "policy_state_dict" in state_dict and isinstance(self.policy, torch.nn.Module):
            self.policy.load_state_dict(state_dict["policy_state_dict"], **kwargs)
        self._load_base_state(state_dict.get("collector", {}))

    def shutdown(self) -> None:
        """Close the env if the collector built it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owned_env and not self.env.is_closed:
            self.env.close()
