"""TicTacToeEnv: rules, perspectives, rewards, single-player mode and bad moves."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import step_mdp
from rl_envs_core._native._tictactoe import TicTacToeEnv
from rl_envs_core.testing import EnvContract


def _play(env, cells, td=None):
    """Play ``cells`` in turn from ``td`` (a fresh game by default); return each step."""
    td = env.reset() if td is None else td
    steps = []
    for cell in cells:
        td["action"] = torch.tensor(cell)
        step = env.step(td)
        steps.append(step)
        td = step_mdp(step)
    return steps


class TestTicTacToeEnv(EnvContract):
    def make_env(self):
        return TicTacToeEnv()

    def test_reset_state(self):
        td = TicTacToeEnv().reset()
        assert td["board"].eq(-1).all() and td["board"].dtype == torch.int32
        assert td["turn"].tolist() == [0]
        assert td["mask"].all() and td["mask"].shape == torch.Size([9])

    def test_board_is_seen_by_the_player_to_move(self):
        env = TicTacToeEnv()
        first, second = _play(env, [4, 0])
        assert first["next", "board"].flatten().tolist() == [-1, -1, -1, -1, 0, -1, -1, -1, -1]
        assert first["next", "turn"].tolist() == [1]
        # after O plays 0, X sees its own stone as 1 and O's as 0
        assert second["next", "board"].flatten().tolist() == [0, -1, -1, -1, 1, -1, -1, -1, -1]
        assert second["next", "mask"].sum().item() == 7

    @pytest.mark.parametrize(
        ("cells", "rewards"),
        [
            ([0, 3, 1, 4, 2], (1.0, -1.0)),  # X takes the top row
            ([0, 3, 1, 4, 8, 5], (-1.0, 1.0)),  # O takes the middle row
            ([0, 1, 4, 8, 2, 6, 3, 5, 7], (0.0, 0.0)),  # full board, no line
        ],
        ids=["x-wins", "o-wins", "draw"],
    )
    def test_game_end_and_rewards(self, cells, rewards):
        steps = _play(TicTacToeEnv(), cells)
        last = steps[-1]["next"]
        assert last["done"].item() and last["terminated"].item()
        assert not last["mask"].any()
        assert (last["player0", "reward"].item(), last["player1", "reward"].item()) == rewards
        for step in steps[:-1]:
            assert not step["next", "done"].item()
            assert step["next", "player0", "reward"].item() == 0.0

    @pytest.mark.parametrize("line", [[0, 4, 8], [2, 4, 6], [1, 4, 7], [6, 7, 8]])
    def test_every_line_wins(self, line):
        others = [c for c in range(9) if c not in line]
        cells = [line[0], others[0], line[1], others[1], line[2]]
        assert _play(TicTacToeEnv(), cells)[-1]["next", "done"].item()

    def test_batched_games(self):
        env = TicTacToeEnv()
        td = env.reset(TensorDict(batch_size=[3]))
        td["action"] = torch.tensor([0, 4, 8])
        out = env.step(td)["next"]
        assert out.batch_size == torch.Size([3])
        assert out["board"].flatten(-2)[torch.arange(3), td["action"]].eq(0).all()

    def test_rand_action_is_legal(self):
        env = TicTacToeEnv()
        env.set_seed(0)
        td = env.reset(TensorDict(batch_size=[64]))
        td["mask"][:, :8] = False
        assert env.rand_action(td)["action"].eq(8).all()

    def test_rand_action_without_mask_uses_every_cell(self):
        env = TicTacToeEnv()
        env.set_seed(0)
        cells = env.rand_action(TensorDict(batch_size=[500]))["action"]
        assert set(cells.tolist()) == set(range(9))

    def test_random_rollout_ends_by_nine_moves(self):
        env = TicTacToeEnv()
        env.set_seed(1)
        data = env.rollout(20)
        assert data.shape[0] <= 9 and data["next", "done"][-1].item()

    def test_single_player_answers_with_o(self):
        env = TicTacToeEnv(single_player=True)
        env.set_seed(0)
        out = _play(env, [4])[0]["next"]
        assert out["turn"].tolist() == [0]
        board = out["board"].flatten()
        assert board.eq(1).sum() == 1 and board.eq(0).sum() == 1 and board[4] == 1

    def test_single_player_o_win_penalizes_x(self):
        env = TicTacToeEnv(single_player=True)
        env.set_seed(0)
        lost = 0
        for _ in range(40):
            data = env.rollout(9)
            last = data["next"][-1]
            assert (last["player0", "reward"] == -last["player1", "reward"]).all()
            lost += int(last["player0", "reward"].item() == -1.0)
        assert lost > 0

    def test_single_player_seeded(self):
        def run():
            env = TicTacToeEnv(single_player=True)
            env.set_seed(5)
            return env.rollout(9)["next", "board"]

        assert torch.equal(run(), run())

    def test_specs(self):
        env = TicTacToeEnv()
        assert env.batch_locked is False
        assert env.action_spec.n == 9 and env.action_spec.shape == torch.Size([])
        assert set(env.full_reward_spec.keys(True, True)) == {
            ("player0", "reward"),
            ("player1", "reward"),
        }
        assert set(env.observation_spec.keys()) == {"board", "turn", "mask"}

    @pytest.mark.parametrize("single_player", [False, True])
    def test_check_env_specs(self, single_player):
        from rl_envs_core import check_env_specs

        env = TicTacToeEnv(single_player=single_player)
        env.set_seed(0)
        check_env_specs(env)


class TestTicTacToeEnvErrors:
    def test_occupied_cell(self):
        env = TicTacToeEnv()
        td = step_mdp(_play(env, [4])[0])
        td["action"] = torch.tensor(4)
        with pytest.raises(ValueError, match=r"illegal move: cell 4.*legal cells there: \[0, 1, 2, 3, 5"):
            env.step(td)

    def test_out_of_range_cell(self):
        env = TicTacToeEnv()
        td = env.reset()
        td["action"] = torch.tensor(9)
        with pytest.raises(ValueError, match=r"illegal move: cell 9"):
            env._step(td)

    def test_move_after_game_over(self):
        env = TicTacToeEnv()
        td = step_mdp(_play(env, [0, 3, 1, 4, 2])[-1])
        td["action"] = torch.tensor(8)
        with pytest.raises(ValueError, match=r"legal cells there: \[\].*reset the game"):
            env._step(td)

    def test_float_action(self):
        env = TicTacToeEnv()
        td = env.reset()
        td["action"] = torch.tensor(4.0)
        with pytest.raises(TypeError, match=r"integer 'action'.*action.long\(\)"):
            env._step(td)

    def test_action_shape(self):
        env = TicTacToeEnv()
        td = env.reset()
        td["action"] = torch.tensor([4])
        with pytest.raises(ValueError, match=r"shape \[\].*got shape \[1\].*squeeze"):
            env._step(td)

    def test_missing_mask(self):
        env = TicTacToeEnv()
        td = env.reset().exclude("mask")
        td["action"] = torch.tensor(0)
        with pytest.raises(KeyError, match=r"missing \['mask'\]"):
            env._step(td)
