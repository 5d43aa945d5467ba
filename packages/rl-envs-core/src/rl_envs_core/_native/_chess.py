"""``ChessEnv``: chess through python-chess (the optional ``chess`` extra)."""

from __future__ import annotations

import importlib
import io
from types import ModuleType
from typing import Any

import torch
from tensordict import NonTensorData, TensorDict, TensorDictBase

from rl_envs_core._env_base import EnvBase
from rl_envs_core._native._messages import entry_names
from rl_envs_core._native._seeding import seeded_generator
from rl_specs import Categorical, Composite, NonTensor, Unbounded

__all__ = ["ChessEnv"]

CHESS_EXTRA = "chess"
_INSTALL = f"pip install 'rl-envs-core[{CHESS_EXTRA}]'"
#: no chess position has more legal moves than this (218), plus one padding slot
MAX_LEGAL_MOVES = 219
_FILES = "abcdefgh"
_PROMOTIONS = "qrbn"


def _import_chess() -> ModuleType:
    try:
        importlib.import_module("chess.pgn")  # the PGN reader/writer is a submodule
        return importlib.import_module("chess")
    except ImportError as err:
        raise ImportError(f"ChessEnv needs python-chess. Install it with: {_INSTALL}") from err


def _uci_moves() -> list[str]:
    """Every move a UCI string can name: queen and knight jumps, then promotions."""
    moves = []
    steps = [(df, dr) for df in (-1, 0, 1) for dr in (-1, 0, 1) if df or dr]
    knight = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]
    for square in range(64):
        file, rank = square % 8, square // 8
        targets = set()
        for df, dr in steps:
            for dist in range(1, 8):
                f, r = file + df * dist, rank + dr * dist
                if 0 <= f < 8 and 0 <= r < 8:
                    targets.add(r * 8 + f)
        for df, dr in knight:
            f, r = file + df, rank + dr
            if 0 <= f < 8 and 0 <= r < 8:
                targets.add(r * 8 + f)
        source = f"{_FILES[file]}{rank + 1}"
        moves += [f"{source}{_FILES[t % 8]}{t // 8 + 1}" for t in sorted(targets)]
    for start, end in ((7, 8), (2, 1)):
        for file in range(8):
            for f in (file - 1, file, file + 1):
                if 0 <= f < 8:
                    moves += [f"{_FILES[file]}{start}{_FILES[f]}{end}{p}" for p in _PROMOTIONS]
    return moves


class ChessEnv(EnvBase):
    """A chess environment that follows the TorchRL API.

    The game is simulated by `python-chess <https://python-chess.readthedocs.io>`_,
    imported when the environment is built (``pip install 'rl-envs-core[chess]'``).

    The action (``int64``, shape ``[]``) indexes :attr:`moves`, the list of every
    move a UCI string can name (``"e2e4"``, ``"a7a8q"``, ...; 1968 entries); the
    legal ones are flagged by the ``"action_mask"`` observation and
    :meth:`rand_action` samples among them. ``"turn"`` (``bool``) is ``True`` when
    white is to move. The reward is ``1`` when white checkmates, ``-1`` when black
    does and ``0`` otherwise; a game ends (``done``, ``terminated``) on checkmate,
    stalemate, insufficient material, the 75-move rule or fivefold repetition.

    Keyword Args:
        stateful (bool, optional): if ``True``, the board lives in the environment.
            If ``False``, the position travels in the tensordict as its ``"fen"``
            (and ``"pgn"`` when ``include_pgn``) entry and is rebuilt at each step.
            Defaults to ``True``.
        include_pgn (bool, optional): add the PGN of the game so far as a ``"pgn"``
            string. Defaults to ``False``.
        include_fen (bool, optional): add the FEN of the position as a ``"fen"``
            string (always on when ``stateful=False``). Defaults to ``False``.
        include_san (bool, optional): add the SAN of the last move as a ``"san"``
            string (``"<start>"`` after a reset). Defaults to ``False``.
        include_legal_moves (bool, optional): add ``"legal_moves"``, the indices of
            the legal moves padded to 219 with ``len(moves)``. Defaults to ``False``.
        mask_actions (bool, optional): add the ``"action_mask"`` boolean entry over
            the action space. Defaults to ``True``.

    Raises:
        ImportError: if python-chess is not installed.

    Examples:
        >>> import torch
        >>> env = ChessEnv(include_fen=True, include_san=True)
        >>> _ = env.set_seed(0)
        >>> td = env.reset()
        >>> print(td["fen"])
        rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1
        >>> td["action"] = torch.tensor(env.moves.index("e2e4"))
        >>> td = env.step(td)
        >>> print(td["next", "san"], td["next", "turn"].item())
        e4 False
        >>> print(td["next", "action_mask"].sum().item())
        20
    """

    def __init__(
        self,
        *,
        stateful: bool = True,
        include_pgn: bool = False,
        include_fen: bool = False,
        include_san: bool = False,
        include_legal_moves: bool = False,
        mask_actions: bool = True,
    ) -> None:
        _import_chess()  # fail early, with the install line, when the extra is missing
        super().__init__()
        self.stateful = stateful
        self.include_pgn = include_pgn
        self.include_fen = include_fen or not stateful
        self.include_san = include_san
        self.include_legal_moves = include_legal_moves
        self.mask_actions = mask_actions
        self.moves = _uci_moves()
        self._index = {move: i for i, move in enumerate(self.moves)}
        self.board = self.lib.Board()
        self.rng = seeded_generator(None)
        self._make_specs()

    @property
    def lib(self) -> ModuleType:
        """The python-chess module (a property, so that the env stays picklable)."""
        return _import_chess()

    def _make_specs(self) -> None:
        n = len(self.moves)
        observations: dict[str, Any] = {"turn": Categorical(2, shape=(), dtype=torch.bool)}
        if self.mask_actions:
            observations["action_mask"] = Categorical(2, shape=(n,), dtype=torch.bool)
        if self.include_legal_moves:
            observations["legal_moves"] = Categorical(n + 1, shape=(MAX_LEGAL_MOVES,))
        for key, on in (("fen", self.include_fen), ("pgn", self.include_pgn), ("san", self.include_san)):
            if on:
                observations[key] = NonTensor(shape=(), example_data="")
        self.observation_spec = Composite(observations)
        if not self.stateful:
            state_keys = ("fen", "pgn") if self.include_pgn else ("fen",)
            self.state_spec = Composite({key: observations[key].clone() for key in state_keys})
        self.action_spec = Categorical(n, shape=())
        self.reward_spec = Unbounded(shape=(1,))
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone())

    def _board_from(self, tensordict: TensorDictBase | None) -> Any:
        """The position named by ``tensordict`` ("pgn" first, then "fen"), else ``None``."""
        if tensordict is None:
            return None
        if self.include_pgn and "pgn" in tensordict.keys():
            game = self.lib.pgn.read_game(io.StringIO(tensordict["pgn"]))
            if game is None or game.errors:
                raise ValueError(
                    f"ChessEnv could not parse the 'pgn' entry {tensordict['pgn']!r}. "
                    f"Pass the 'pgn' produced by this environment or a valid PGN string."
                )
            return game.end().board()
        if "fen" in tensordict.keys():
            fen = tensordict["fen"]
            try:
                return self.lib.Board(fen)
            except ValueError as err:
                raise ValueError(
                    f"ChessEnv expected a valid FEN in 'fen', got {fen!r} ({err}). "
                    f"Pass board.fen() of a python-chess board or the 'fen' of a previous step."
                ) from None
        return None

    def _observe(self, board: Any, san: str) -> TensorDictBase:
        legal = [self._index[move.uci()] for move in board.legal_moves]
        game_over = board.is_game_over()
        reward = 0.0
        if board.is_checkmate():
            reward = -1.0 if board.turn == self.lib.WHITE else 1.0
        done = torch.tensor([game_over])
        out = TensorDict(
            {
                "turn": torch.tensor(board.turn),
                "reward": torch.tensor([reward]),
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros(1, dtype=torch.bool),
            },
            batch_size=[],
        )
        if self.mask_actions:
            mask = torch.zeros(len(self.moves), dtype=torch.bool)
            mask[legal] = True
            out["action_mask"] = mask
        if self.include_legal_moves:
            padded = torch.full((MAX_LEGAL_MOVES,), len(self.moves), dtype=torch.int64)
            padded[: len(legal)] = torch.tensor(legal, dtype=torch.int64)
            out["legal_moves"] = padded
        if self.include_fen:
            out["fen"] = NonTensorData(board.fen())
        if self.include_pgn:
            out["pgn"] = NonTensorData(str(self.lib.pgn.Game.from_board(board)))
        if self.include_san:
            out["san"] = NonTensorData(san)
        return out

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        board = self._board_from(tensordict)
        if board is None:
            board = self.lib.Board()
        self.board = board
        return self._observe(board, "<start>").exclude("reward")

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        board = self.board if self.stateful else self._board_from(tensordict)
        if board is None:
            raise KeyError(
                f"ChessEnv(stateful=False) expected the position in a 'fen' entry, got keys "
                f"{entry_names(tensordict)}. Step the output of env.reset()."
            )
        move = self._move(tensordict, board)
        san = board.san(move)
        board.push(move)
        self.board = board
        return self._observe(board, san)

    def _move(self, tensordict: TensorDictBase, board: Any) -> Any:
        action = tensordict.get("action", None)
        if action is None:
            raise KeyError(
                f"ChessEnv.step expected an 'action' entry, got keys "
                f"{entry_names(tensordict)}. Write an index into env.moves "
                f"(env.rand_action(td) samples a legal one)."
            )
        if action.numel() != 1 or action.is_floating_point() or action.dtype == torch.bool:
            raise ValueError(
                f"ChessEnv expected 'action' as one integer (an index into env.moves), got "
                f"dtype={action.dtype}, shape={list(action.shape)}. Use "
                f"torch.tensor(env.moves.index('e2e4')) or env.rand_action(td)."
            )
        index = int(action)
        uci = self.moves[index] if 0 <= index < len(self.moves) else None
        move = self.lib.Move.from_uci(uci) if uci is not None else None
        if move is None or move not in board.legal_moves:
            legal = sorted(board.san(m) for m in board.legal_moves)
            raise ValueError(
                f"ChessEnv received an illegal move: action {index} ({uci!r}) in position "
                f"{board.fen()!r}. Legal moves: {legal}. Pick an action flagged by the "
                f"'action_mask' entry or use env.rand_action(td)."
            )
        return move

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a uniformly drawn legal ``"action"`` into ``tensordict``.

        Args:
            tensordict (TensorDictBase, optional): the current step. Defaults to
                ``None`` (a fresh tensordict).

        Returns:
            The tensordict, with its ``"action"`` entry set.
        """
        if tensordict is None:
            tensordict = TensorDict(batch_size=[])
        board = None if self.stateful else self._board_from(tensordict)
        if board is None:
            board = self.board
        legal = list(board.legal_moves)
        if not legal:
            raise RuntimeError(
                f"ChessEnv.rand_action found no legal move: the game is over in position "
                f"{board.fen()!r}. Reset the environment first."
            )
        pick = int(torch.randint(len(legal), (), generator=self.rng))
        tensordict.set("action", torch.tensor(self._index[legal[pick].uci()]))
        return tensordict

    def _set_seed(self, seed: int | None) -> None:
        self.rng = seeded_generator(seed)

