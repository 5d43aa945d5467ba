"""MultiStep: n-step windows, discounting, done/truncation handling, nested keys, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from rl_replay import MultiStep


def _ted(
    batch: tuple[int, ...], T: int, done_at: list[int], *, trailing: bool = True
) -> TensorDict:
    obs = torch.arange(T + 1, dtype=torch.float32).expand(*batch, T + 1)
    done = torch.zeros(*batch, T, dtype=torch.bool)
    for t in done_at:
        done[..., t] = True
    shape = (1,) if trailing else ()
    return TensorDict(
        {
            "obs": obs[..., :-1],
            "done": torch.zeros(*batch, T, *shape, dtype=torch.bool),
            "next": {
                "obs": obs[..., 1:],
                "done": done.reshape(*batch, T, *shape),
                "reward": torch.ones(*batch, T, *shape),
                "agent": {"pos": obs[..., 1:].unsqueeze(-1) * 10},
            },
        },
        batch_size=[*batch, T],
    )


def _reference_ends(done: list[bool], n: int) -> list[int]:
    T = len(done)
    ends = []
    for t in range(T):
        end = t
        while end < min(t + n - 1, T - 1) and not done[end]:
            end += 1
        ends.append(end)
    return ends


class TestMultiStep:
    @pytest.mark.parametrize("n", [1, 2, 3, 5, 12])
    @pytest.mark.parametrize("done_at", [[], [3], [2, 3, 7], [9]])
    def test_next_entries_come_from_the_window_end(self, n, done_at):
        data = _ted((2,), 10, done_at)
        out = MultiStep(0.9, n)(data)
        done = data["next", "done"][0, :, 0].tolist()
        ends = torch.tensor(_reference_ends(done, n))
        assert (out["next", "obs"][0] == ends + 1).all()
        assert (out["next", "agent", "pos"][0, :, 0] == (ends + 1) * 10).all()
        assert (out["steps_to_next_obs"][0] == ends - torch.arange(10) + 1).all()

    def test_reward_is_the_discounted_window_sum(self):
        data = _ted((), 6, [2], trailing=False)
        data["next", "reward"] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        out = MultiStep(0.5, 3)(data)
        expected = torch.tensor([1 + 1 + 0.75, 2 + 1.5, 3.0, 4 + 2.5 + 1.5, 5 + 3.0, 6.0])
        torch.testing.assert_close(out["next", "reward"], expected)
        torch.testing.assert_close(out["next", "original_reward"], data["next", "reward"])
        torch.testing.assert_close(out["gamma"], 0.5 ** out["steps_to_next_obs"])

    def test_one_step_leaves_the_data_unchanged(self):
        data = _ted((3,), 7, [4])
        out = MultiStep(0.99, 1)(data)
        for key in data.keys(True, True):
            assert (out[key] == data[key]).all(), key
        assert out is not data

    def test_done_entries_and_input_are_left_untouched(self):
        data = _ted((2,), 8, [3])
        before = data.clone()
        out = MultiStep(0.9, 4)(data)
        assert (out["next", "done"] == data["next", "done"]).all()
        assert (data == before).all()

    def test_new_entries_take_the_done_shape_without_its_singleton(self):
        out = MultiStep(0.9, 3)(_ted((2, 3), 5, [1]))
        for key in ("gamma", "steps_to_next_obs", "nonterminal"):
            assert out[key].shape == torch.Size([2, 3, 5])

    def test_nonterminal_marks_terminal_next_states_and_masked_steps(self):
        data = _ted((), 6, [2], trailing=False)
        data["collector", "mask"] = torch.tensor([True] * 5 + [False])
        out = MultiStep(0.9, 2)(data)
        # windows: 0->1, 1->2 (done), 2->2 (done), 3->4, 4->5 (batch end), 5 masked
        assert out["nonterminal"].tolist() == [True, False, False, True, True, False]

    def test_terminated_decides_bootstrapping_over_truncation(self):
        data = _ted((), 4, [1], trailing=False)
        data["next", "terminated"] = torch.zeros(4, dtype=torch.bool)
        out = MultiStep(0.9, 2)(data)
        assert out["nonterminal"].all()  # a truncated end still bootstraps

    def test_done_with_extra_dims_runs_per_agent(self):
        T = 5
        done = torch.zeros(T, 2, dtype=torch.bool)
        done[1, 0] = True
        data = TensorDict(
            {
                "obs": torch.arange(T).unsqueeze(-1).expand(T, 2).float(),
                "next": {
                    "obs": torch.arange(1, T + 1).unsqueeze(-1).expand(T, 2).float(),
                    "done": done,
                    "reward": torch.ones(T, 2),
                },
            },
            batch_size=[T],
        )
        out = MultiStep(1.0, 3)(data)
        assert out["next", "obs"][:, 0].tolist() == [2.0, 2.0, 5.0, 5.0, 5.0]
        assert out["next", "obs"][:, 1].tolist() == [3.0, 4.0, 5.0, 5.0, 5.0]
        assert out["next", "reward"][:, 0].tolist() == [2.0, 1.0, 3.0, 2.0, 1.0]

    def test_ted_check_fails_after_the_shift(self):
        # 002/003, "Multi-step" (data_13): the shifted next observation breaks the TED check
        data = _ted((2,), 10, [])
        assert (data[..., 1:]["obs"] == data[..., :-1]["next", "obs"]).all()
        data = MultiStep(0.9, 3)(data)
        assert not (data[..., 1:]["obs"] == data[..., :-1]["next", "obs"]).all()

    def test_non_tensor_next_leaves_are_gathered(self):
        data = _ted((), 4, [], trailing=False)
        data["next", "label"] = NonTensorStack.from_list(["a", "b", "c", "d"])
        out = MultiStep(0.9, 2)(data)
        assert out["next", "label"] == ["b", "c", "d", "d"]

    def test_is_a_module_with_its_settings(self):
        ms = MultiStep(0.9, 3)
        assert isinstance(ms, torch.nn.Module)
        assert (ms.gamma, ms.n_steps) == (0.9, 3)
        assert "n_steps=3" in repr(ms)

    @pytest.mark.parametrize("gamma, n_steps", [(0.0, 2), (1.5, 2), (0.9, 0), (0.9, 2.5)])
    def test_bad_settings_raise(self, gamma, n_steps):
        with pytest.raises(ValueError, match="MultiStep expected"):
            MultiStep(gamma, n_steps)

    def test_missing_reward_raises_key_error_listing_entries(self):
        data = _ted((), 4, []).exclude(("next", "reward"))
        with pytest.raises(KeyError, match=r"\('next', 'reward'\).*found only"):
            MultiStep(0.9, 2)(data)

    def test_done_shape_incompatible_with_entries_raises(self):
        data = _ted((2,), 4, [])
        data["next", "done"] = torch.zeros(2, 4, 3, 1, dtype=torch.bool)
        with pytest.raises(RuntimeError, match="tensordict shape must be compatible"):
            MultiStep(0.9, 2)(data)

    def test_no_time_dim_raises(self):
        data = TensorDict(
            {"next": {"done": torch.zeros(1, dtype=torch.bool), "reward": torch.ones(1)}}
        )
        with pytest.raises(ValueError, match="time dim"):
            MultiStep(0.9, 2)(data)
