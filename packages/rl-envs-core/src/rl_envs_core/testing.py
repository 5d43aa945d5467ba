"""Test helpers for environment implementations: ``CountingEnv`` and ``EnvContract``.

``BufferedCountingEnv`` is a ``CountingEnv`` that also steps straight into a
preallocated batch (the ``buffered_stepper`` method of
``rl_envs_core.extension.SupportsBufferedSteps``): the same data through the fast
path of ``rollout`` and the collectors, for tests that compare the two paths.

``EnvContract`` is the shared contract every env's test class subclasses::

    class TestPendulum(EnvContract):
        def make_env(self):
            return PendulumEnv()

Its checks are plain asserts (specs carry the batch size, reset/step/rollout
shapes, the TED layout, seeding determinism and ``check_env_specs``).
``CountingEnv`` is a trivial env (its observation counts steps) used by tests and
benchmarks of this package and of the packages above it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import is_non_tensor

from rl_envs_core._check import check_env_specs
from rl_envs_core._env_base import DeviceType, EnvBase
from rl_envs_core._step_mdp import as_tuple, leaf_keys, step_mdp
from rl_specs import Categorical, Composite, Unbounded


class CountingEnv(EnvBase):
    """An env whose observation counts the steps since the last reset.

    Every step adds one to ``"observation"`` and gives a reward of one; the env is
    done (terminated) after ``max_steps`` steps. The action (``Categorical(2)``) is
    read but ignored. Partial resets (``"_reset"``) reset only the masked elements.

    Args:
        max_steps (int, optional): steps before done. Defaults to ``5``.
        batch_size (sequence of int, optional): the batch size. Defaults to ``()``.
        device (torch.device, optional): the env device. Defaults to ``None``.
        **kwargs: passed to :class:`EnvBase` (``auto_reset``, ``spec_locked``, ...).

    Examples:
        >>> env = CountingEnv(max_steps=2)
        >>> env.rollout(5)["next", "observation"].squeeze(-1)
        tensor([1., 2.])
    """

    def __init__(
        self,
        max_steps: int = 5,
        *,
        batch_size: Sequence[int] = (),
        device: DeviceType = None,
        **kwargs: bool,
    ) -> None:
        super().__init__(batch_size=batch_size, device=device, **kwargs)
        shape = (*self.batch_size, 1)
        self.max_steps = max_steps
        self.observation_spec = Composite(observation=Unbounded(shape=shape), shape=self.batch_size)
        self.action_spec = Categorical(2, shape=shape)
        self.reward_spec = Unbounded(shape=shape)
        # a buffer, so that ``env.to(device)`` moves the step counter with the specs
        self.register_buffer("count", torch.zeros(shape, device=self.device), persistent=False)

    def _output(self, done: torch.Tensor) -> TensorDictBase:
        return TensorDict(
            {
                "observation": self.count,
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            self.count = torch.zeros_like(self.count)
        else:
            self.count = torch.where(reset.reshape(self.count.shape), 0, self.count)
        return self._output(torch.zeros_like(self.count, dtype=torch.bool))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count = self.count + 1
        out = self._output(self.count >= self.max_steps)
        out.set("reward", torch.ones(self.count.shape, device=self.device))
        return out

    def _set_seed(self, seed: int | None) -> None:
        self.seed = seed


class BufferedCountingEnv(CountingEnv):
    """A :class:`CountingEnv` that steps in place into a preallocated batch.

    Implements ``buffered_stepper`` (``rl_envs_core.extension.SupportsBufferedSteps``):
    ``rollout`` and the collectors take their fast path with it and give the data
    ``CountingEnv`` gives through the general path.

    Args:
        max_steps, batch_size, device, **kwargs: as in :class:`CountingEnv`.

    Attributes:
        buffered_batches (int): how many batches were stepped in place.
        decline (bool): when ``True``, ``buffered_stepper`` declines (``None``).

    Examples:
        >>> env = BufferedCountingEnv(max_steps=2)
        >>> _ = env.rollout(2, break_when_any_done=False)  # checks the first step
        >>> data = env.rollout(3, break_when_any_done=False)
        >>> data["observation"].squeeze(-1), env.buffered_batches
        (tensor([0., 1., 0.]), 1)
    """

    def __init__(self, *args: int, **kwargs: bool) -> None:
        super().__init__(*args, **kwargs)
        self.buffered_batches = 0
        self.decline = False

    def buffered_stepper(self, batch: TensorDictBase) -> _CountingStepper | None:
        """A stepper writing into ``batch``, or ``None`` when :attr:`decline` is set."""
        if self.decline or not self._io_checked or self.run_type_checks:
            return None  # the first step goes through env.step's checks
        self.buffered_batches += 1
        return _CountingStepper(self, batch)


class _CountingStepper:
    """Steps a :class:`BufferedCountingEnv` through one batch, writing into its tensors."""

    def __init__(self, env: BufferedCountingEnv, batch: TensorDictBase) -> None:
        self.env = env
        self.dim = len(env.batch_size)
        self.steps = batch.batch_size[self.dim]
        nxt = batch.get("next")
        self.entries = [nxt.get(k) for k in ("observation", "reward", "done", "terminated")]
        self.truncated = nxt.get("truncated", None)  # present once add_truncated_keys()

    def fill(self, reset_last: bool = True) -> tuple | None:
        env, dim = self.env, self.dim
        steps, envs, firsts = [], [], []
        for t in range(self.steps):
            env.count = env.count + 1
            done = env.count >= env.max_steps
            obs, reward, done_out, terminated = (e.select(dim, t) for e in self.entries)
            obs.copy_(env.count)
            reward.fill_(1.0)
            done_out.copy_(done)
            terminated.copy_(done)
            if self.truncated is not None:
                self.truncated.select(dim, t).zero_()
            if bool(done.any()) and (reset_last or t < self.steps - 1):
                finished = done.reshape(-1).nonzero().squeeze(-1)
                env.count = torch.where(done, 0, env.count)
                steps += [t] * len(finished)
                envs.append(finished)
                firsts.append(env.count.reshape(-1, 1)[finished])
        if not steps:
            return None
        return (
            torch.tensor(steps),
            torch.cat(envs) if self.dim else None,
            {"observation": torch.cat(firsts)},
        )


def _leaf_tuples(td: TensorDictBase) -> set[tuple[str, ...]]:
    return {as_tuple(k) for k in leaf_keys(td)}


def assert_close_nan(a: TensorDictBase, b: TensorDictBase) -> None:
    """Assert two tensordicts are equal, treating ``nan == nan``."""
    assert _leaf_tuples(a) == _leaf_tuples(b)
    for key in leaf_keys(a):
        x, y = a.get(key), b.get(key)
        if is_non_tensor(x):
            assert x.tolist() == y.tolist(), key
            continue
        if x.is_floating_point():
            assert torch.equal(x.isnan(), y.isnan()), key
        assert torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)), key


class EnvContract:
    """Checks every ``EnvBase`` implementation must pass; subclass and define ``make_env``.

    Class attributes tune the checks: ``rollout_steps`` (length of the rollouts)
    and ``deterministic`` (``False`` skips the seeding-determinism check, for envs
    without a seedable source of randomness).
    """

    rollout_steps: int = 5
    deterministic: bool = True

    def make_env(self) -> EnvBase:
        """Build the env under test."""
        raise NotImplementedError("EnvContract subclasses must define make_env().")

    def test_specs_lead_with_batch_size(self) -> None:
        env = self.make_env()
        batch = tuple(env.batch_size)
        for name in ("input_spec", "output_spec"):
            spec = getattr(env, name)
            assert tuple(spec.shape) == batch, name
            for key in spec.keys(True, True):
                assert tuple(spec[key].shape[: len(batch)]) == batch, (name, key)

    def test_done_and_terminated_are_flanked(self) -> None:
        env = self.make_env()
        names = {as_tuple(k) for k in env.done_keys}
        for key in names:
            if key[-1] in ("done", "terminated"):
                dual = "terminated" if key[-1] == "done" else "done"
                assert (*key[:-1], dual) in names, key

    def test_reset_matches_specs(self) -> None:
        env = self.make_env()
        data = env.reset()
        assert data.batch_size == env.batch_size or not env.batch_locked
        expected = {as_tuple(k) for k in (*env.observation_keys, *env.done_keys)}
        assert expected <= _leaf_tuples(data)
        assert not any(k[-1] == "_reset" for k in _leaf_tuples(data))
        for key in env.done_keys:
            assert not data.get(key).any(), key

    def test_step_writes_ted_layout(self) -> None:
        env = self.make_env()
        data = env.rand_step(env.reset())
        leaves = _leaf_tuples(data)
        for key in env.action_keys:
            assert as_tuple(key) in leaves, key
        for key in (*env.observation_keys, *env.reward_keys, *env.done_keys):
            assert ("next", *as_tuple(key)) in leaves, key
        for key in env.reward_keys:
            assert as_tuple(key) not in leaves, key

    def test_rollout_has_time_dim(self) -> None:
        env = self.make_env()
        steps = self.rollout_steps
        data = env.rollout(steps, break_when_any_done=False)
        assert data.names[-1] == "time"
        assert data.batch_size == (*env.batch_size, steps)
        later, earlier = data[..., 1:], data[..., :-1]
        for key in env.observation_keys:
            done = earlier.get(("next", env.done_keys[0]))
            not_reset = ~done.reshape(*done.shape[: earlier.batch_dims], -1).any(-1)
            x, y = later.get(key)[not_reset], earlier.get(("next", key))[not_reset]
            assert torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)), key

    def test_seeding_is_deterministic(self) -> None:
        if not self.deterministic:
            return
        runs = []
        for _ in range(2):
            env = self.make_env()
            torch.manual_seed(0)
            next_seed = env.set_seed(0)
            runs.append((next_seed, env.rollout(self.rollout_steps, break_when_any_done=False)))
        assert runs[0][0] == runs[1][0]
        assert_close_nan(runs[0][1], runs[1][1])

    def test_check_env_specs_passes(self) -> None:
        check_env_specs(self.make_env())

    def test_rand_action_is_in_spec(self) -> None:
        env = self.make_env()
        data = env.rand_action(env.reset())
        for key in env.action_keys:
            assert env.full_action_spec[key].is_in(data.get(key)), key

    def test_step_and_maybe_reset_keeps_going(self) -> None:
        env = self.make_env()
        data_ = env.reset()
        for _ in range(2 * self.rollout_steps):
            data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
            assert "next" in data.keys() and "next" not in data_.keys()
            assert not any(k[-1] == "_reset" for k in _leaf_tuples(data_))
            if not env.allow_done_after_reset:
                for key in env.done_keys:
                    assert not data_.get(key).any(), key

    def test_partial_reset_keeps_other_elements(self) -> None:
        env = self.make_env()
        if not env.batch_locked or not env.batch_size or env.batch_size[0] < 2:
            return
        data = env.rollout(2, break_when_any_done=False)[..., -1]
        root = step_mdp(data, reward_keys=env.reward_keys, action_keys=env.action_keys)
        before = root.clone()
        for key in env.reset_keys:
            level = as_tuple(key)[:-1]
            done = next(root.get(k) for k in env.done_keys if as_tuple(k)[:-1] == level)
            mask = torch.zeros_like(done)
            mask[0] = True
            root.set(key, mask)
        out = env.reset(root)
        for key in env.observation_keys:
            new, old = out.get(key), before.get(key)
            if isinstance(new, torch.Tensor) and not is_non_tensor(new):
                assert torch.equal(torch.nan_to_num(new[1:]), torch.nan_to_num(old[1:])), key
