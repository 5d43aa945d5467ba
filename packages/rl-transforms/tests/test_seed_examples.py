"""The examples of the seed's "Transforms" section, run as doctests.

``GymEnv("Pendulum-v1", from_pixels=True)`` lives in rl-env-adapters (not a dependency
of this package), so a small env with the same entries stands in for it: float64
``"observation"``, ``"pixels"`` (uint8, channels-last) and a float64 bounded action.
"""

from __future__ import annotations

import doctest

import torch
from tensordict import TensorDict

import rl_transforms

SEED_EXAMPLES = '''
Transformed environment:

>>> base_env = make_base_env()
>>> transform = Compose(ToTensorImage(in_keys=["pixels"]), Resize(64, 64, in_keys=["pixels"]))
>>> env = TransformedEnv(base_env, transform)
>>> env.reset()["pixels"].shape
torch.Size([3, 64, 64])

Transform parent:

>>> resize_parent = env.transform[-1].parent  # the same as TransformedEnv(base_env, transform[:-1])
>>> [type(t).__name__ for t in resize_parent.transform]
['ToTensorImage']
>>> resize_parent.observation_spec["pixels"].shape
torch.Size([3, 8, 8])

Inverse transform:

>>> env.append_transform(DoubleToFloat(in_keys_inv=["action"]))  # doctest: +ELLIPSIS
TransformedEnv(...)
>>> env.action_spec.dtype
torch.float32
>>> _ = env.rand_step(env.reset())
>>> base_env.last_action.dtype  # mapped from float32 to float64 before base_env.step
torch.float64

Transforming tensors and specs:

>>> td = TensorDict({"action": torch.zeros(2)})
>>> for t in reversed(env.transform):
...     td = t.inv(td)
>>> td["action"].dtype
torch.float64

Designing your own transform:

>>> class AddOneToObs(Transform):
...     """A transform that adds 1 to the observation tensor."""
...
...     def __init__(self):
...         super().__init__(in_keys=["observation"], out_keys=["observation"])
...
...     def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
...         return obs + 1
>>> env = TransformedEnv(make_base_env(), AddOneToObs())
>>> env.reset()["observation"].tolist()
[1.0, 1.0, 1.0]
>>> transform = Compose(AddOneToObs(), RewardSum())
>>> env = TransformedEnv(make_base_env(), transform)
>>> env.rollout(2)["next", "episode_reward"].squeeze(-1).tolist()
[1.0, 2.0]

Inverse transforms:

>>> class AddOneToAction(Transform):
...     """A transform that adds 1 to the action tensor."""
...     def __init__(self):
...         super().__init__(in_keys=[], out_keys=[], in_keys_inv=["action"], out_keys_inv=["action"])
...     def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
...         return action + 1
>>> base_env = make_base_env()
>>> env = TransformedEnv(base_env, AddOneToAction())
>>> _ = env.step(env.reset().set("action", torch.zeros(2, dtype=torch.float64)))
>>> base_env.last_action.tolist()
[1.0, 1.0]

Cloning transforms:

>>> transform1, transform2, transform3 = StepCounter(), RewardSum(), ObservationNorm(loc=0.0, scale=2.0)
>>> env = TransformedEnv(base_env, Compose(transform1, transform2, transform3))
>>> third_transform = env.transform[2]
>>> assert third_transform.parent is not None
>>> TransformedEnv(base_env, third_transform)  # raises: third_transform already has a parent
Traceback (most recent call last):
    ...
ValueError: ObservationNorm already belongs to a Compose; a transform has a single parent. Attach a parentless copy instead: transform.clone().
>>> TransformedEnv(base_env, third_transform.clone())  # doctest: +ELLIPSIS
TransformedEnv(...)
>>> last_two = env.transform[-2:]
>>> assert isinstance(last_two, Compose)
>>> assert last_two.parent is None
>>> assert last_two[0] is not transform2
>>> assert isinstance(last_two[0], type(transform2))  # and the buffers will match
>>> assert last_two[1] is not transform3
>>> assert isinstance(last_two[1], type(transform3))  # and the buffers will match
>>> assert last_two[1].scale is transform3.scale

Masked actions:

>>> env = TransformedEnv(
...     make_masked_env(),
...     ActionMask(action_key="action", mask_key="action_mask"),
... )
>>> env.rollout(4)["action"].long().argmax(-1).tolist()
[0, 1, 2, 3]
'''


def _globs(continuous_env, masked_env) -> dict:
    globs = {name: getattr(rl_transforms, name) for name in rl_transforms.__all__}
    globs.update(
        torch=torch,
        TensorDict=TensorDict,
        make_base_env=lambda: continuous_env(max_steps=100, pixels=True),
        make_masked_env=masked_env,
    )
    return globs


def test_seed_transform_examples(continuous_env, masked_env):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(
        SEED_EXAMPLES, _globs(continuous_env, masked_env), "seed-transforms", None, 0
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 30
    assert result.failed == 0
