"""``EnvCreator``: a picklable env factory that knows its env's metadata and shares state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rl_envs_core import EnvBase, EnvMetaData


def _shared_state(env: EnvBase) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``env``, moved to shared memory."""
    state = {}
    for name, tensor in env.state_dict(keep_vars=True).items():
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
            state[name] = tensor.detach().share_memory_()
    return state


class EnvCreator:
    """Environment creator class.

    ``EnvCreator`` is a generic environment creator class that can substitute
    lambda functions when creating environments in multiprocessing contexts. It
    builds one env in the main process to read its metadata
    (:attr:`meta_data`: specs, batch size, device) and, with ``share_memory``,
    moves every parameter and buffer of that env (for instance the running
    statistics of a normalisation transform) to shared memory. Each env it then
    creates, in this process or in a worker process, uses those shared tensors, so
    in-place updates are seen by all of them.

    Args:
        create_env_fn (callable): returns an :class:`~rl_envs_core.EnvBase`.
        create_env_kwargs (dict, optional): kwargs of ``create_env_fn``. Defaults
            to ``None``.
        share_memory (bool, optional): share the env's parameters and buffers
            across the created envs. Defaults to ``True``.
        **kwargs: more kwargs of ``create_env_fn`` (``EnvCreator(GymEnv,
            env_name="Pendulum-v1")``); ``create_env_kwargs`` entries win over them.

    Raises:
        TypeError: ``create_env_fn`` is not callable or does not return an env.

    Examples:
        >>> from rl_envs_core.testing import CountingEnv
        >>> creator = EnvCreator(CountingEnv, {"max_steps": 3})
        >>> creator.meta_data.batch_size
        torch.Size([])
        >>> env = creator()
        >>> env.max_steps
        3
        >>> creator.make_variant(max_steps=7)().max_steps
        7
        >>> EnvCreator(CountingEnv, max_steps=5)().max_steps
        5
    """

    def __init__(
        self,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict | None = None,
        share_memory: bool = True,
        **kwargs: Any,  # Any: forwarded to create_env_fn
    ) -> None:
        if not callable(create_env_fn):
            raise TypeError(
                f"EnvCreator expected a callable returning an env, got "
                f"{type(create_env_fn).__name__}. Pass the env class or a function."
            )
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = {**kwargs, **(create_env_kwargs or {})}
        self.share_memory = share_memory
        env = self._build(self.create_env_kwargs)
        self.meta_data = EnvMetaData.metadata_from_env(env)
        self._shared = _shared_state(env) if share_memory else {}
        env.close()

    def _build(self, kwargs: dict) -> EnvBase:
        env = self.create_env_fn(**kwargs)
        if not isinstance(env, EnvBase):
            raise TypeError(
                f"EnvCreator: {self.create_env_fn!r} returned {type(env).__name__}, "
                f"expected an EnvBase. Wrap the env or return an EnvBase."
            )
        return env

    def __call__(self, **kwargs: Any) -> EnvBase:  # Any: forwarded to create_env_fn
        """Build an env (``kwargs`` update ``create_env_kwargs``) sharing the state.

        Raises:
            ValueError: a shared tensor does not match the new env's (other shape).
        """
        env = self._build({**self.create_env_kwargs, **kwargs})
        if self._shared:
            own = env.state_dict(keep_vars=True)
            with torch.no_grad():
                for name, shared in self._shared.items():
                    tensor = own.get(name)
                    if tensor is None:
                        continue
                    if tensor.shape != shared.shape:
                        raise ValueError(
                            f"EnvCreator shares {name!r} with shape {tuple(shared.shape)}, "
                            f"but the new env has shape {tuple(tensor.shape)}. Build envs "
                            f"whose modules match, or pass share_memory=False."
                        )
                    tensor.set_(shared)
        return env

    def make_variant(self, **kwargs: Any) -> EnvCreator:  # Any: forwarded to create_env_fn
        """A new ``EnvCreator`` whose kwargs are updated with ``kwargs``."""
        return EnvCreator(
            self.create_env_fn, {**self.create_env_kwargs, **kwargs}, self.share_memory
        )

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The shared tensors, by parameter/buffer name."""
        return dict(self._shared)

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Copy ``state_dict`` into the shared tensors (seen by every created env).

        Raises:
            KeyError: a name is not a shared tensor.
        """
        for name, value in state_dict.items():
            if name not in self._shared:
                raise KeyError(
                    f"EnvCreator has no shared tensor {name!r}. Available: {sorted(self._shared)}."
                )
            self._shared[name].copy_(value)

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, {self.create_env_kwargs!r})"
