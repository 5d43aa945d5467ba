"""``MultiAction``: several actions per environment step (a macro-step).

The policy writes a stack of actions; the transform plays them one after the other
in the parent environment (the base env and the transforms before this one) and
stops the elements that reach a done state. The last action of the stack goes
through the ordinary step of the ``TransformedEnv``, so transforms appended after
this one see one step per stack.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from rl_envs_core.extension import any_true, entries, key_layout, new_unchecked
from rl_envs_core.extension import get_entry as read
from rl_envs_core.extension import set_entry as write
from rl_specs import Composite, TensorSpec
from rl_transforms._base import Transform
from rl_transforms._flow import _parent_env


def _dynamic_stack_spec(spec: TensorSpec, position: int) -> TensorSpec:
    """``spec`` with a new dim of any size (``-1``) inserted at ``position``."""
    spec = spec.unsqueeze(position)
    shape = list(spec.shape)
    shape[position] = -1
    return spec.expand(shape)


class MultiAction(Transform):
    """A transform to execute multiple actions in the parent environment.

    The actions written by the policy are stacked along dim ``dim`` counted from the
    end of the batch dims (``dim=1``: shape ``(*batch, n, *action_shape)``). Each of
    the ``n`` actions is played in turn; an element that reaches a done state skips
    the remaining actions (a ``"_step"`` mask), and the macro-step returns the state
    after the last action played.

    Transforms placed before this one run once per action (in the parent env);
    transforms after it run once per stack. Put bookkeeping transforms that keep
    their state in the step data (``StepCounter``, ``RewardSum``) after it.

    Args:
        dim (int, optional): where the actions are stacked, counted from the first dim
            after the batch dims (``1`` is the first of them). Defaults to ``1``.
        stack_rewards (bool, optional): return the reward of every action, stacked
            like the actions (zeros where an element had stopped); else the last
            reward. Defaults to ``True``.
        stack_observations (bool, optional): return the observation after every
            action, stacked like the actions; else the last one. Defaults to ``False``.

    Raises:
        ValueError: if ``dim < 1``; at step time if an action stack does not have the
            shape of the action spec with one more dim, or the stacks differ in length.
        KeyError: at step time if an action entry is missing.

    Examples:
        >>> import torch
        >>> from rl_envs_core.testing import CountingEnv
        >>> from rl_transforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=10), MultiAction())
        >>> td = env.reset().set("action", torch.zeros(3, 1, dtype=torch.int64))
        >>> out = env.step(td)
        >>> out["next", "observation"], out["next", "reward"].shape
        (tensor([3.]), torch.Size([3, 1]))
    """

    _plays_sub_steps = True

    def __init__(
        self, *, dim: int = 1, stack_rewards: bool = True, stack_observations: bool = False
    ) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(
                f"MultiAction expected dim >= 1 (counted after the batch dims), got {dim!r}. "
                f"Use dim=1 to stack the actions right after the batch dims."
            )
        super().__init__()
        self.dim = dim
        self.stack_rewards = stack_rewards
        self.stack_observations = stack_observations
        self.__dict__["_history"] = None

    # ------------------------------------------------------------------ keys
    def _keys(self) -> dict[str, list[NestedKey]]:
        keys = self._lazy.get("keys")
        if keys is None:
            parent = _parent_env(self)
            keys = self._lazy["keys"] = {
                "action": list(parent.action_keys),
                "reward": list(parent.reward_keys),
                # "done" is the union of its level's end signals: one read per level
                "done_flags": list(key_layout(parent)["done_flags"]),
                "observation": list(parent.full_observation_spec.keys(True, True)),
            }
        return keys

    def _stepper(self) -> Any:  # Any: an EnvBase (the parent, or its base env when bare)
        stepper = self._lazy.get("stepper")
        if stepper is None:
            parent = _parent_env(self)
            # no transform before this one: step the base env itself
            bare = len(parent.transform) == 0 if hasattr(parent, "transform") else False
            stepper = self._lazy["stepper"] = parent.base_env if bare else parent
        return stepper

    def _action_shapes(self) -> dict[NestedKey, list[int]]:
        shapes = self._lazy.get("action_specs")
        if shapes is None:
            actions = _parent_env(self).full_action_spec
            shapes = self._lazy["action_specs"] = {
                key: list(actions[key].shape) for key in actions.keys(True, True)
            }
        return shapes

    # ------------------------------------------------------------------ stepping
    def _split_actions(self, tensordict: TensorDictBase) -> tuple[list[NestedKey], list[tuple]]:
        keys = self._keys()["action"]
        batch_dims = tensordict.batch_dims
        position = batch_dims + self.dim - 1
        spec = self._action_shapes()
        length = None
        stacks = []
        for key in keys:
            value = read(tensordict, key)
            if value is None:
                raise KeyError(
                    f"MultiAction expected a stack of actions at {key!r}, found no such entry. "
                    f"Available keys: {sorted(map(str, tensordict.keys(True, True)))}. Write "
                    f"the actions, stacked at dim {position}, before calling env.step."
                )
            checked = self._lazy.get("checked")
            if checked is None:
                checked = self._lazy["checked"] = set()
            if (key, value.shape, position) not in checked:  # each stack shape checked once
                # a batch-unlocked env may step more leading dims than its own batch
                extra = batch_dims - len(_parent_env(self).batch_size)
                expected = [*tensordict.batch_size[: max(extra, 0)], *spec[key]]
                if value.dim() != len(expected) + 1 or position >= value.dim():
                    found = tuple(value.shape)
                    raise ValueError(self._shape_message(key, expected, position, found))
                rest = [s for i, s in enumerate(value.shape) if i != position]
                if rest != expected:
                    found = tuple(value.shape)
                    raise ValueError(self._shape_message(key, expected, position, found))
                checked.add((key, value.shape, position))
            if length is not None and value.shape[position] != length:
                raise ValueError(
                    f"MultiAction expected every action stack to hold the same number of "
                    f"actions, got {length} and {value.shape[position]} (at {key!r}). Stack "
                    f"as many actions for every action entry."
                )
            length = value.shape[position]
            stacks.append(value.unbind(position))
        if not length:
            raise ValueError(
                f"MultiAction expected at least one action in the stack at dim {position}, "
                f"got an empty stack. Write (*batch, n, *action_shape) with n >= 1."
            )
        return keys, list(zip(*stacks))

    def _shape_message(
        self, key: NestedKey, expected: list[int], position: int, found: tuple
    ) -> str:
        shape = [*expected[:position], "n", *expected[position:]]
        return (
            f"MultiAction expected the action stack at {key!r} to have shape "
            f"({', '.join(map(str, shape))}) (the action spec shape {tuple(expected)} with "
            f"the stack at dim {position}), found {found}. Stack the actions with "
            f"torch.stack(actions, dim={position})."
        )

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        keys, actions = self._split_actions(tensordict)
        stepper = self._stepper()
        batch = tensordict.batch_size
        running = read(tensordict, "_step")
        stopped = None if running is None else ~running.reshape(batch)
        reward_keys = self._keys()["reward"]
        skip_keys = set(reward_keys)
        rewards: list[dict] = []
        observations: list[dict] = []
        played = 0
        # the sub-step inputs are new tensordicts: the caller's data is never written
        if type(tensordict) is TensorDict and all(type(key) is str for key in keys):
            # plain data: each sub-step input is built from the entries in one go
            current = dict(entries(tensordict))
            device = tensordict.device
            for step_actions in actions[:-1]:
                current.update(zip(keys, step_actions))
                if stopped is not None:
                    if bool(stopped.all()):
                        break
                    current["_step"] = ~stopped
                td = new_unchecked(current, batch, device, nested=False)
                nxt = stepper.next_of(td)
                current = dict(entries(td))  # with whatever the env wrote into its input
                stopped = self._after_sub_step(nxt, batch, stopped, rewards, observations)
                played += 1
                # the next sub-step starts from this one's output, rewards left out
                if type(nxt) is TensorDict:
                    for key, value in entries(nxt).items():
                        if key not in skip_keys:
                            current[key] = value
                else:
                    current.update(nxt.exclude(*reward_keys).items())
            current.update(zip(keys, actions[-1]))
            if stopped is not None:
                current["_step"] = ~stopped
            td = new_unchecked(current, batch, device, nested=False)
        else:
            td = tensordict.copy()
            for step_actions in actions[:-1]:
                for key, action in zip(keys, step_actions):
                    write(td, key, action)
                if stopped is not None:
                    if bool(stopped.all()):
                        break
                    write(td, "_step", ~stopped)
                nxt = stepper.next_of(td)
                stopped = self._after_sub_step(nxt, batch, stopped, rewards, observations)
                played += 1
                if type(nxt) is TensorDict:
                    for key, value in entries(nxt).items():
                        if key not in skip_keys:
                            write(td, key, value)
                else:
                    td.update(nxt.exclude(*reward_keys))
            for key, action in zip(keys, actions[-1]):
                write(td, key, action)
            if stopped is not None:
                write(td, "_step", ~stopped)
        self.__dict__["_history"] = (rewards, observations, len(actions) - 1 - played)
        return td

    def _after_sub_step(
        self,
        nxt: TensorDictBase,
        batch: torch.Size,
        stopped: torch.Tensor | None,
        rewards: list[dict],
        observations: list[dict],
    ) -> torch.Tensor | None:
        """Keep what a sub-step returned (rewards, observations); the elements now stopped."""
        keys = self._keys()
        if self.stack_rewards:
            rewards.append({key: read(nxt, key) for key in keys["reward"]})
        if self.stack_observations:
            observations.append({key: read(nxt, key) for key in keys["observation"]})
        done = self._done_mask(nxt, batch)
        if done is not None:
            stopped = done if stopped is None else stopped | done
        return stopped

    def _inv_writes_input(self) -> bool:
        return False  # the sub-steps and the last step read new tensordicts

    def _done_mask(self, nxt: TensorDictBase, batch: torch.Size) -> torch.Tensor | None:
        """The elements done after a sub-step (``None`` when none is)."""
        mask = None
        for key in self._keys()["done_flags"]:
            value = read(nxt, key)
            if value is None or not any_true(value):
                continue
            value = value.reshape(*batch, -1).any(-1) if batch else value.any()
            mask = value if mask is None else mask | value
        return mask

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        history = self.__dict__["_history"]
        self.__dict__["_history"] = None
        if history is None:
            return next_tensordict
        rewards, observations, skipped = history
        position = next_tensordict.batch_dims + self.dim - 1
        if self.stack_rewards:
            self._stack_into(next_tensordict, rewards, self._keys()["reward"], position, skipped)
        if self.stack_observations:
            keys = self._keys()["observation"]
            self._stack_into(next_tensordict, observations, keys, position, skipped)
        return next_tensordict

    @staticmethod
    def _stack_into(
        next_tensordict: TensorDictBase,
        history: list[dict],
        keys: list[NestedKey],
        position: int,
        skipped: int,
    ) -> None:
        for key in keys:
            last = read(next_tensordict, key)
            if last is None:
                continue
            values = [step[key] for step in history]
            if skipped:  # every element had stopped
                values += [torch.zeros_like(last)] * skipped
            write(next_tensordict, key, torch.stack([*values, last], position))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "MultiAction plays actions in an environment and cannot be applied to stored data. "
            "Use it in a TransformedEnv: env.append_transform(MultiAction())."
        )

    def _has_inverse(self) -> bool:
        return True

    # ------------------------------------------------------------------ specs
    def transform_input_spec(self, input_spec: Composite) -> Composite:
        actions = input_spec["full_action_spec"]
        position = len(input_spec.shape) + self.dim - 1
        specs = {}
        for key in list(actions.keys(True, True)):
            leaf = actions[key]
            specs[key] = list(leaf.shape)
            actions[key] = _dynamic_stack_spec(leaf, position)
        self._lazy["action_specs"] = specs
        return input_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        position = len(output_spec.shape) + self.dim - 1
        roles = []
        if self.stack_rewards:
            roles.append("full_reward_spec")
        if self.stack_observations:
            roles.append("full_observation_spec")
        for role in roles:
            composite = output_spec[role]
            for key in list(composite.keys(True, True)):
                composite[key] = _dynamic_stack_spec(composite[key], position)
        return output_spec

    def __repr__(self) -> str:
        return (
            f"MultiAction(dim={self.dim}, stack_rewards={self.stack_rewards}, "
            f"stack_observations={self.stack_observations})"
        )
