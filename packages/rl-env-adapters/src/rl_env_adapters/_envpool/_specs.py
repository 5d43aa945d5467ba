"""EnvPool specs: from ``envpool.make_spec`` (or a built pool's ``spec``) to rl-specs.

EnvPool describes one env with gymnasium spaces; every value it returns carries a
leading dim of ``num_envs`` (sync) or ``batch_size`` (async). The conversion reuses
the gym space converter and compiles the readers and writer once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from rl_env_adapters._errors import ENVPOOL_EXTRA, import_backend
from rl_env_adapters._gym._arrays import make_reader, make_writer
from rl_env_adapters._gym._spaces import gym_space_to_spec
from rl_specs import Composite, TensorSpec, Unbounded

__all__ = ["EnvPoolSpecs", "check_seed", "check_task_id", "envpool_module", "specs_from_envpool"]

# Any in this module: EnvPool spec objects, spaces and arrays are library-defined.


def envpool_module(owner: str) -> ModuleType:
    """Import envpool, or raise the ImportError naming the ``envpool`` extra."""
    return import_backend("envpool", owner=owner, extra=ENVPOOL_EXTRA)


def check_task_id(envpool: ModuleType, task_id: str) -> None:
    """Raise a ValueError with close matches when EnvPool does not know ``task_id``."""
    if not isinstance(task_id, str):
        raise TypeError(
            f"MultiThreadedEnv expected an EnvPool task id (str) such as 'CartPole-v1', got "
            f"{type(task_id).__name__}. To wrap a built pool, use MultiThreadedEnvWrapper(pool)."
        )
    known = envpool.list_all_envs()
    if task_id not in known:
        close = difflib.get_close_matches(task_id, known, n=3)
        hint = f" Did you mean {close}?" if close else ""
        raise ValueError(
            f"EnvPool has no task {task_id!r}.{hint} See envpool.list_all_envs() for the "
            "supported ids."
        )


def check_seed(seed: int | Sequence[int], num_envs: int) -> int | list[int]:
    """Validate EnvPool's ``seed``: an int, or exactly one int per env.

    Raises:
        TypeError: if ``seed`` is neither an int nor a sequence of ints.
        ValueError: if a sequence does not hold exactly ``num_envs`` seeds.

    Examples:
        >>> check_seed([1, 2], 2)
        [1, 2]
    """
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return int(seed)
    if isinstance(seed, (str, bytes)) or not isinstance(seed, (Sequence, np.ndarray)):
        raise TypeError(
            f"EnvPool seed must be an int or a sequence of ints, got {type(seed).__name__}. "
            "Pass seed=0 (env i gets 0 + i) or one seed per env."
        )
    seeds = [int(s) for s in seed]
    if len(seeds) != num_envs:
        raise ValueError(
            f"EnvPool expected one seed per env (num_envs={num_envs}), got {len(seeds)} seeds. "
            f"Pass a sequence of length {num_envs}, or a single int."
        )
    return seeds


@dataclass(frozen=True)
class EnvPoolSpecs:
    """Specs of one pool (batched by ``num_envs``) and its compiled value converters."""

    observation: Composite
    action: TensorSpec
    reward: TensorSpec
    read_obs: Callable[[Any], dict[str, torch.Tensor]]
    write_action: Callable[[torch.Tensor], Any]


def specs_from_envpool(
    env_spec: Any,
    *,
    num_envs: int,
    categorical_action_encoding: bool = False,
    device: torch.device | None = None,
    from_pixels: bool = False,
) -> EnvPoolSpecs:
    """Convert an EnvPool spec into batched specs and readers.

    Args:
        env_spec: the object returned by ``envpool.make_spec`` (or ``pool.spec``).

    Keyword Args:
        num_envs (int): the number of envs (leading dim of every spec).
        categorical_action_encoding (bool, optional): ``Discrete`` actions as indices.
            Defaults to ``False`` (one-hot).
        device (torch.device, optional): spec device. Defaults to ``None``.
        from_pixels (bool, optional): observations are rendered frames, stored under
            ``"pixels"``. Defaults to ``False``.

    Raises:
        TypeError: if a space has no conversion.

    Examples:
        >>> import envpool
        >>> specs = specs_from_envpool(envpool.make_spec("CartPole-v1"), num_envs=4)
        >>> specs.observation["observation"].shape, specs.action.shape
        (torch.Size([4, 4]), torch.Size([4, 2]))
    """
    obs_space, act_space = env_spec.observation_space, env_spec.action_space
    conv = {"categorical_action_encoding": categorical_action_encoding, "device": device}
    obs = gym_space_to_spec(obs_space, **conv)
    batch = torch.Size([num_envs])
    if isinstance(obs, Composite):
        obs_spec = obs.expand(*batch)
        read = make_reader(obs_space, obs, batch_dims=1)
    else:
        key = "pixels" if from_pixels else "observation"
        obs_spec = Composite({key: obs.expand(*batch, *obs.shape)}, shape=batch)
        leaf = make_reader(obs_space, obs, batch_dims=1)

        def read(value: Any) -> dict[str, torch.Tensor]:
            return {key: leaf(value)}

    action = gym_space_to_spec(act_space, remap_state_to_observation=False, **conv)
    action_spec = action.expand(*batch, *action.shape)
    write = make_writer(act_space, action, batch_dims=1)
    reward = Unbounded(shape=(*batch, 1), device=device, dtype=torch.float32)
    return EnvPoolSpecs(obs_spec, action_spec, reward, read, write)
