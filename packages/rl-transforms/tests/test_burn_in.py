"""BurnInTransform: refresh recurrent states over the first steps of sampled slices."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_transforms import BurnInTransform


class RunningSum(torch.nn.Module):
    """A toy recurrent cell over dim 1: next hidden = first hidden + cumulative obs."""

    def forward(self, obs, hidden):
        return hidden[:, :1] + obs.cumsum(1)


def _module():
    return TensorDictModule(RunningSum(), ["obs", "hidden"], [("next", "hidden")])


def _data(steps=6):
    return TensorDict(
        {
            "obs": torch.arange(2 * steps, dtype=torch.float32).reshape(2, steps, 1),
            "hidden": torch.full((2, steps, 1), 100.0),
        },
        [2, steps],
    )


class TestBurnInTransform:
    def test_returns_the_rest_with_the_burnt_in_state(self):
        data = _data()
        out = BurnInTransform(_module(), burn_in=2)(data)
        assert out.shape == (2, 4)
        # element 0: obs 0, 1 -> 100 + 0 + 1; element 1: obs 6, 7 -> 100 + 13
        assert out["hidden"][:, 0].squeeze(-1).tolist() == [101.0, 113.0]
        assert out["hidden"][:, 1:].eq(100.0).all()
        assert torch.equal(out["obs"], data["obs"][:, 2:])

    def test_input_is_not_modified(self):
        data = _data()
        BurnInTransform(_module(), burn_in=3)(data)
        assert data["hidden"].eq(100.0).all()

    def test_out_keys_default_to_the_next_outputs_and_accept_next_prefix(self):
        assert BurnInTransform(_module(), burn_in=1).out_keys == ["hidden"]
        t = BurnInTransform([_module()], burn_in=1, out_keys=[("next", "hidden")])
        assert t.out_keys == ["hidden"]
        assert t.in_keys == ["obs", "hidden"]

    def test_missing_state_is_created(self):
        module = TensorDictModule(lambda obs: obs.cumsum(1), ["obs"], [("next", "memory")])
        out = BurnInTransform(module, burn_in=2)(_data())
        assert out["memory"].shape == (2, 4, 1)
        assert out["memory"][:, 0].squeeze(-1).tolist() == [1.0, 13.0]
        assert out["memory"][:, 1:].eq(0).all()

    def test_burn_in_zero_is_a_no_op(self):
        data = _data()
        assert BurnInTransform(_module(), burn_in=0)(data) is data

    def test_no_gradient_through_the_burn_in(self):
        module = TensorDictModule(torch.nn.Linear(1, 1), ["obs"], [("next", "hidden")])
        out = BurnInTransform(module, burn_in=2)(_data())
        assert not out["hidden"].requires_grad

    def test_too_short_slices_raise(self):
        with pytest.raises(ValueError, match=r"more than 6 time steps.*got 6"):
            BurnInTransform(_module(), burn_in=6)(_data(6))

    def test_missing_module_output_raises(self):
        t = BurnInTransform(_module(), burn_in=2, out_keys=["other"])
        with pytest.raises(KeyError, match=r"\('next', 'other'\)"):
            t(_data())

    def test_non_module_raises(self):
        with pytest.raises(TypeError, match=r"TensorDictModuleBase"):
            BurnInTransform([torch.nn.GRU(1, 1)], burn_in=1)

    def test_negative_burn_in_raises(self):
        with pytest.raises(ValueError, match=r"burn_in >= 0"):
            BurnInTransform(_module(), burn_in=-1)

    def test_in_an_env_raises(self):
        with pytest.raises(RuntimeError, match=r"replay buffer"):
            BurnInTransform(_module(), burn_in=1)._step(TensorDict(), TensorDict())
