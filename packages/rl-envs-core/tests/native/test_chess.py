"""ChessEnv (python-chess, the ``chess`` extra): moves, outputs, statelessness, errors."""

from __future__ import annotations

import pickle
import sys

import pytest
import torch
from tensordict import TensorDict

from rl_envs_core import step_mdp
from rl_envs_core._native import _chess
from rl_envs_core._native._chess import ChessEnv
from rl_envs_core.testing import EnvContract

pytest.importorskip("chess", reason="ChessEnv needs the 'chess' extra (python-chess)")

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


def _play(env, ucis, td=None):
    td = env.reset() if td is None else td
    steps = []
    for uci in ucis:
        td["action"] = torch.tensor(env.moves.index(uci))
        steps.append(env.step(td))
        td = step_mdp(steps[-1])
    return steps


class TestChessEnv(EnvContract):
    rollout_steps = 8

    def make_env(self):
        return ChessEnv(include_legal_moves=True)

    def test_move_space(self):
        env = ChessEnv()
        assert len(env.moves) == 1968 == len(set(env.moves))
        assert {"e2e4", "g1f3", "e1g1", "a7a8q", "b2a1n"} <= set(env.moves)
        assert env.action_spec.n == 1968

    def test_reset_outputs(self):
        env = ChessEnv(include_fen=True, include_san=True, include_pgn=True)
        td = env.reset()
        assert td["fen"] == START
        assert td["san"] == "<start>"
        assert '[Result "*"]' in td["pgn"]
        assert td["turn"].item() is True
        assert td["action_mask"].sum().item() == 20
        assert not td["done"].any()

    def test_step_outputs(self):
        env = ChessEnv(include_fen=True, include_san=True, include_pgn=True)
        out = _play(env, ["e2e4", "e7e5", "g1f3"])[-1]["next"]
        assert out["san"] == "Nf3"
        assert out["fen"].startswith("rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b")
        assert "1. e4 e5 2. Nf3" in out["pgn"]
        assert out["turn"].item() is False
        assert out["reward"].tolist() == [0.0]

    def test_legal_moves_padded(self):
        env = ChessEnv(include_legal_moves=True)
        legal = env.reset()["legal_moves"]
        assert legal.shape == torch.Size([219])
        assert (legal < len(env.moves)).sum() == 20
        assert legal[20:].eq(len(env.moves)).all()

    def test_mask_actions_off(self):
        td = ChessEnv(mask_actions=False).reset()
        assert "action_mask" not in td.keys()

    def test_fools_mate_black_wins(self):
        env = ChessEnv()
        last = _play(env, ["f2f3", "e7e5", "g2g4", "d8h4"])[-1]["next"]
        assert last["done"].item() and last["terminated"].item()
        assert last["reward"].tolist() == [-1.0]
        assert not last["action_mask"].any()

    def test_scholars_mate_white_wins(self):
        env = ChessEnv()
        moves = ["e2e4", "e7e5", "f1c4", "b8c6", "d1h5", "g8f6", "h5f7"]
        assert _play(env, moves)[-1]["next", "reward"].tolist() == [1.0]

    def test_reset_from_fen(self):
        env = ChessEnv(include_fen=True)
        fen = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"
        td = env.reset(TensorDict({"fen": fen}))
        assert td["fen"] == fen
        assert td["action_mask"].sum().item() == 6  # 4 king moves, e3 and e4

    def test_stateless_position_travels_in_tensordict(self):
        env = ChessEnv(stateful=False)
        assert "fen" in env.state_spec.keys()
        start = env.reset()
        after_e4 = step_mdp(_play(env, ["e2e4"], start.clone())[0])
        # a different line played from the same start does not disturb the first one
        _play(env, ["d2d4"], start.clone())
        out = _play(env, ["e7e5"], after_e4)[0]["next"]
        assert out["fen"].startswith("rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w")

    def test_stateless_rand_action_reads_the_position(self):
        env = ChessEnv(stateful=False)
        td = env.reset(TensorDict({"fen": "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"}))
        env.reset()  # the env's own board moves on; the tensordict's position is used
        for _ in range(10):
            move = env.moves[env.rand_action(td)["action"].item()]
            assert move in {"e1d1", "e1f1", "e1d2", "e1f2", "e2e3", "e2e4"}

    def test_stateless_with_pgn_keeps_history(self):
        env = ChessEnv(stateful=False, include_pgn=True)
        out = _play(env, ["g1f3", "g8f6", "f3g1", "f6g8"])[-1]["next"]
        assert "1. Nf3 Nf6 2. Ng1 Ng8" in out["pgn"]

    def test_rand_action_is_legal_and_seeded(self):
        def run():
            env = ChessEnv(include_san=True)
            env.set_seed(0)
            return [step["next", "san"] for step in env.rollout(12).unbind(0)]

        first = run()
        assert first == run()
        assert len(first) == 12

    def test_pickles_mid_game(self):
        env = ChessEnv(include_fen=True)
        _play(env, ["e2e4"])
        clone = pickle.loads(pickle.dumps(env))
        assert clone.board.fen() == env.board.fen()
        td = TensorDict(action=torch.tensor(clone.moves.index("e7e5")))
        assert clone.step(td)["next", "fen"].startswith("rnbqkbnr/pppp1ppp/8/4p3/4P3/")

    def test_check_env_specs(self):
        from rl_envs_core import check_env_specs

        env = ChessEnv(include_fen=True, include_san=True, include_legal_moves=True)
        env.set_seed(0)
        check_env_specs(env)


class TestChessEnvErrors:
    def test_illegal_move(self):
        env = ChessEnv()
        td = env.reset()
        td["action"] = torch.tensor(env.moves.index("e2e5"))
        with pytest.raises(ValueError, match=r"illegal move: action \d+ \('e2e5'\).*Legal moves: \[.*'e4'"):
            env.step(td)

    @pytest.mark.parametrize("action", [torch.tensor(1.0), torch.tensor([1, 2])], ids=["float", "shape"])
    def test_bad_action(self, action):
        env = ChessEnv()
        td = env.reset()
        td["action"] = action
        with pytest.raises(ValueError, match=r"one integer.*env.moves"):
            env._step(td)

    def test_out_of_range_action(self):
        env = ChessEnv()
        td = env.reset()
        td["action"] = torch.tensor(5000)
        with pytest.raises(ValueError, match=r"illegal move: action 5000 \(None\)"):
            env._step(td)

    def test_bad_fen(self):
        with pytest.raises(ValueError, match=r"valid FEN in 'fen'"):
            ChessEnv().reset(TensorDict({"fen": "not a position"}))

    def test_rand_action_after_game_over(self):
        env = ChessEnv()
        _play(env, ["f2f3", "e7e5", "g2g4", "d8h4"])
        with pytest.raises(RuntimeError, match=r"no legal move.*Reset"):
            env.rand_action()

    def test_missing_backend(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "chess", None)
        with pytest.raises(ImportError, match=r"pip install 'rl-envs-core\[chess\]'"):
            _chess._import_chess()
