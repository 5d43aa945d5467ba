"""``PendulumEnv``: a stateless, batch-unlocked pendulum swing-up task.

The whole state (angle ``th``, angular velocity ``thdot``) and the physical
parameters (``params``) travel in the tensordict, so one environment instance
simulates any batch of pendulums: the batch is the one of the tensordict given to
:meth:`~PendulumEnv.reset`, usually built by :meth:`PendulumEnv.gen_params`.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core._env_base import EnvBase
from rl_envs_core._native._messages import entry_names
from rl_envs_core._native._seeding import seeded_generator
from rl_envs_core._td import get_entry, new_unchecked
from rl_specs import Bounded, Composite, Unbounded, make_composite_from_td

__all__ = ["PendulumEnv"]

#: Initial states are drawn uniformly in ``[-DEFAULT_X, DEFAULT_X]`` (angle) and
#: ``[-DEFAULT_Y, DEFAULT_Y]`` (angular velocity).
DEFAULT_X = math.pi
DEFAULT_Y = 1.0
_PARAM_KEYS = ("max_speed", "max_torque", "dt", "g", "m", "l")


class PendulumEnv(EnvBase):
    """A stateless Pendulum environment.

    The pendulum starts at a random angle and must be swung up and held upright
    (``th == 0``) with a bounded torque. Each step costs
    ``normalize(th) ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2`` (the reward is its
    negative) and integrates the dynamics with the explicit Euler scheme::

        thdot' = clip(thdot + (3 g / (2 l) sin(th) + 3 / (m l^2) u) dt, -max_speed, max_speed)
        th'    = th + thdot' dt

    The environment never terminates: bound the rollout with ``max_steps``.

    The environment is stateless and batch-unlocked (``batch_locked = False``): its
    own ``batch_size`` is empty, and reset/step accept a tensordict of any batch
    size. Pass ``env.gen_params(batch_size=[B])`` to :meth:`reset` to simulate ``B``
    pendulums at once (each may carry its own parameters).

    Args:
        td_params (TensorDictBase, optional): the default parameters, as returned by
            :meth:`gen_params` (an unbatched tensordict with a ``"params"`` entry).
            They set the bounds of the specs and are used when ``reset()`` is given
            no ``"params"``. Defaults to ``gen_params()``.
        seed (int, optional): the seed of the initial-state generator. Defaults to
            ``None`` (a random seed).
        device (torch.device, optional): where the data lives. Defaults to ``None``.

    Raises:
        KeyError: if ``td_params`` lacks one of the parameter entries.
        ValueError: if ``td_params`` is batched.

    Examples:
        >>> import torch
        >>> env = PendulumEnv(seed=0)
        >>> td = env.reset()
        >>> print(sorted(td.keys()))
        ['done', 'params', 'terminated', 'th', 'thdot']
        >>> td = env.rand_step(td)
        >>> print(td["next", "reward"].shape, td["next", "th"].dtype)
        torch.Size([1]) torch.float32
        >>> batched = env.reset(env.gen_params(batch_size=[4]))
        >>> print(env.rollout(3, tensordict=batched).shape)
        torch.Size([4, 3])
    """

    batch_locked = False
    rng: torch.Generator | None = None
    _cached_constants: tuple[list[torch.Tensor], list[int], tuple[torch.Tensor, ...]] | None = None

    def __init__(
        self,
        td_params: TensorDictBase | None = None,
        seed: int | None = None,
        device: torch.device | str | int | None = None,
    ) -> None:
        super().__init__(device=device)
        if td_params is None:
            td_params = self.gen_params(device=self.device)
        params = _check_params(td_params, where="PendulumEnv(td_params=...)")
        if td_params.batch_dims:
            raise ValueError(
                f"PendulumEnv expected unbatched td_params (batch_size=[]), got "
                f"batch_size={list(td_params.batch_size)}. Build the env with "
                f"gen_params() and pass the batched params to env.reset() instead."
            )
        self._make_spec(td_params, params)
        if seed is None:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        self.set_seed(seed)

    @staticmethod
    def gen_params(
        g: float = 10.0,
        batch_size: list[int] | torch.Size | None = None,
        device: torch.device | str | int | None = None,
    ) -> TensorDictBase:
        """Build the parameters of the pendulum.

        Args:
            g (float, optional): the gravity. Defaults to ``10.0``.
            batch_size (list of int, optional): the batch of pendulums the
                parameters describe. Defaults to ``None`` (a single pendulum).
            device (torch.device, optional): where the tensors live. Defaults to ``None``.

        Returns:
            A tensordict with one ``"params"`` entry holding ``max_speed``,
            ``max_torque``, ``dt``, ``g``, ``m`` and ``l``.

        Examples:
            >>> params = PendulumEnv.gen_params(g=9.81, batch_size=[2])
            >>> print(params["params", "g"])
            tensor([9.8100, 9.8100])
        """
        td = TensorDict(
            {
                "params": TensorDict(
                    {
                        "max_speed": 8,
                        "max_torque": 2.0,
                        "dt": 0.05,
                        "g": g,
                        "m": 1.0,
                        "l": 1.0,
                    },
                    [],
                )
            },
            [],
            device=device,
        )
        if batch_size:
            td = td.expand(batch_size).contiguous()
        return td

    def _make_spec(self, td_params: TensorDictBase, params: TensorDictBase) -> None:
        max_speed = params["max_speed"]
        max_torque = params["max_torque"]
        self.observation_spec = Composite(
            th=Bounded(low=-math.pi, high=math.pi, shape=(), dtype=torch.float32),
            thdot=Bounded(low=-max_speed, high=max_speed, shape=(), dtype=torch.float32),
            params=make_composite_from_td(params, unsqueeze_null_shapes=False),
            shape=(),
        )
        # stateless: the previous observation (state and params) is an input of step
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Bounded(
            low=-max_torque, high=max_torque, shape=(1,), dtype=torch.float32
        )
        self.reward_spec = Unbounded(shape=(*td_params.shape, 1))
        self._default_params = td_params

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is None or "params" not in tensordict.keys():
            batch_size = self.batch_size if tensordict is None else tensordict.batch_size
            tensordict = self._default_params.expand(batch_size).clone()
        params = _check_params(tensordict, where="PendulumEnv.reset(tensordict)")
        shape = tensordict.shape
        device = params.device if params.device is not None else self.device
        th = (
            torch.rand(shape, generator=self.rng, device=device).mul_(2 * DEFAULT_X).sub_(DEFAULT_X)
        )
        thdot = (
            torch.rand(shape, generator=self.rng, device=device).mul_(2 * DEFAULT_Y).sub_(DEFAULT_Y)
        )
        return TensorDict({"th": th, "thdot": thdot, "params": params}, batch_size=shape)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        th = get_entry(tensordict, "th")
        thdot = get_entry(tensordict, "thdot")
        action = get_entry(tensordict, "action")
        params = get_entry(tensordict, "params")
        if params is None:
            values = [None]
        else:
            entries = dict(params.items())  # one pass: cheaper than one get() per parameter
            values = [entries.get(key) for key in _PARAM_KEYS]
        if th is None or thdot is None or action is None or any(v is None for v in values):
            required = ["th", "thdot", "action", *(("params", k) for k in _PARAM_KEYS)]
            missing = [
                k if isinstance(k, str) else ".".join(k) for k in required if k not in tensordict
            ]
            raise KeyError(
                f"PendulumEnv.step expected the entries th, thdot, action and params.<name> "
                f"for each name in {list(_PARAM_KEYS)}; missing {missing}, present "
                f"{entry_names(tensordict)}. Step the tensordict returned by env.reset() "
                f"(or step_mdp of the previous step) after writing an action of shape "
                f"[*batch, 1]."
            )
        if action.shape[-1:] != (1,) or not action.is_floating_point():
            raise ValueError(
                f"PendulumEnv expected 'action' as a float tensor of shape "
                f"{[*tensordict.batch_size, 1]}, got dtype={action.dtype}, "
                f"shape={list(action.shape)}. Use env.action_spec.rand() (or "
                f"action.float().unsqueeze(-1)) to build a valid action."
            )
        neg_max_torque, max_torque, neg_max_speed, max_speed, dt, gravity, torque = self._constants(
            values, th.dtype
        )
        u = action.squeeze(-1).clamp(neg_max_torque, max_torque)
        sin = th.sin()
        # atan2(sin, cos) is the angle brought back to [-pi, pi]: the cost of th and
        # th + 2k*pi is the same
        costs = torch.atan2(sin, th.cos()).square_()
        costs.addcmul_(thdot, thdot, value=0.1).addcmul_(u, u, value=0.001)
        new_thdot = torch.addcmul(thdot, u, torque).addcmul_(sin, gravity)
        new_thdot.clamp_(neg_max_speed, max_speed)
        new_th = torch.addcmul(th, new_thdot, dt)
        reward = costs.neg_().unsqueeze_(-1)
        # one allocation for the two (always False) flags
        done, terminated = torch.zeros(
            (2, *reward.shape), dtype=torch.bool, device=reward.device
        ).unbind(0)
        return new_unchecked(
            {
                "th": new_th,
                "thdot": new_thdot,
                "params": params,
                "reward": reward,
                "done": done,
                "terminated": terminated,
            },
            batch_size=tensordict.batch_size,
            # every entry is computed from (or is) an entry of tensordict: its device
            # holds, and stating it spares EnvBase a .to(env.device) of the output
            device=tensordict.device,
        )

    def _constants(
        self, values: list[torch.Tensor], dtype: torch.dtype
    ) -> tuple[torch.Tensor, ...]:
        """The per-step constants of the parameters ``values``, cached while they are unchanged.

        Returns ``(-max_torque, max_torque, -max_speed, max_speed, dt, dt * 3g / 2l,
        dt * 3 / ml^2)``. The cache holds the parameter tensors themselves (so their
        identity cannot be reused) and their version counters (bumped by any in-place
        edit), so new or edited parameters are always seen.
        """
        cached = self._cached_constants
        if cached is not None:
            source, versions, constants = cached
            if all(a is b for a, b in zip(source, values)) and versions == [
                v._version for v in values
            ]:
                return constants
        max_speed, max_torque, dt, g, m, length = (v.to(dtype) for v in values)
        constants = (
            -max_torque,
            max_torque,
            -max_speed,
            max_speed,
            dt,
            dt * 3 * g / (2 * length),
            dt * 3 / (m * length**2),
        )
        self._cached_constants = (values, [v._version for v in values], constants)
        return constants

    def _set_seed(self, seed: int | None) -> None:
        self.rng = seeded_generator(seed, self.device)


def _check_params(tensordict: TensorDictBase, *, where: str) -> TensorDictBase:
    """Return ``tensordict["params"]`` after checking that every parameter is there."""
    params = tensordict.get("params", None)
    if not isinstance(params, TensorDictBase):
        raise KeyError(
            f"{where} expected a params sub-tensordict, got the entries "
            f"{entry_names(tensordict)}. Build it with PendulumEnv.gen_params()."
        )
    missing = [key for key in _PARAM_KEYS if key not in params.keys()]
    if missing:
        raise KeyError(
            f"{where} expected the parameters {list(_PARAM_KEYS)}, missing {missing}. "
            f"Start from PendulumEnv.gen_params() and edit its entries."
        )
    return params
