"""OutputBuilder: the TensorDict of a step, built unchecked where the checks cannot fail."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rl_env_adapters._td_out import OutputBuilder
from rl_specs import Composite, Unbounded


def _source():
    return {"observation": torch.zeros(3, 2), "reward": torch.ones(3, 1)}


def test_a_flat_source_gives_what_the_public_constructor_gives():
    build = OutputBuilder(Composite(observation=Unbounded((3, 2)), shape=(3,)), None)
    source = _source()
    out = build(source, torch.Size([3]), None)
    expected = TensorDict(_source(), batch_size=[3])
    assert type(out) is TensorDict and out.batch_size == expected.batch_size
    assert (out == expected).all()
    out["extra"] = torch.zeros(3)  # the output owns its entries: the source is not edited
    assert "extra" not in source


def test_nested_observations_become_sub_tensordicts():
    spec = Composite(pos=Composite(x=Unbounded((3, 1)), shape=(3,)), shape=(3,))
    build = OutputBuilder(spec, None)
    out = build({"pos": {"x": torch.ones(3, 1)}}, torch.Size([3]), None)
    assert isinstance(out.get("pos"), TensorDict) and out["pos", "x"].shape == (3, 1)
    assert out.get("pos").batch_size == (3,)


def test_another_device_goes_through_the_public_constructor():
    build = OutputBuilder(Composite(observation=Unbounded((3, 2)), shape=(3,)), None)
    out = build(_source(), torch.Size([3]), torch.device("cpu"))  # the env moved since
    assert out.device == torch.device("cpu")
