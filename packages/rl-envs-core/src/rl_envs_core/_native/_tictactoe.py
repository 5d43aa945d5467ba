"""``TicTacToeEnv``: a stateless, batch-unlocked tic-tac-toe game for one or two players."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs_core._env_base import EnvBase
from rl_envs_core._native._messages import entry_names
from rl_envs_core._native._seeding import seeded_generator
from rl_specs import Categorical, Composite, Unbounded

__all__ = ["TicTacToeEnv"]

# the 8 winning lines, as indices in the flattened 3x3 board
_LINES = torch.tensor(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
_EMPTY, _OPPONENT, _OWN = -1, 0, 1


class TicTacToeEnv(EnvBase):
    """A Tic-Tac-Toe implementation.

    Two players alternate; ``"turn"`` says who is to move (``0`` for the first
    player "X", ``1`` for "O"). The ``"board"`` (``int32``, shape ``[3, 3]``) is
    written from the point of view of the player to move: ``1`` marks its own
    stones, ``0`` its opponent's and ``-1`` an empty cell, so one policy can play
    both sides. The action (``int64``, shape ``[]``) is the index ``row * 3 + col``
    of an empty cell; ``"mask"`` (``bool``, shape ``[9]``) flags the legal cells, and
    :meth:`rand_action` samples among them.

    A game ends (``done`` and ``terminated``) when a player completes a row, column
    or diagonal, or when the board is full. The rewards are zero-sum and nested per
    player: the winner gets ``1`` and the loser ``-1`` at ``("player0", "reward")``
    and ``("player1", "reward")``; every other step gives ``0``.

    The environment is stateless and batch-unlocked: the game lives in the
    tensordict, so ``reset(TensorDict(batch_size=[B]))`` starts ``B`` games.

    Keyword Args:
        single_player (bool, optional): if ``True``, the agent plays "X" (player 0)
            and every one of its moves is answered by a uniformly random legal move
            of "O", so each step returns with ``turn == 0``. Defaults to ``False``
            (both players act through ``step``).
        device (torch.device, optional): where the data lives. Defaults to ``None``.

    Examples:
        >>> from tensordict import TensorDict
        >>> env = TicTacToeEnv()
        >>> _ = env.set_seed(0)
        >>> td = env.reset()
        >>> print(td["board"].tolist(), td["turn"].tolist())
        [[-1, -1, -1], [-1, -1, -1], [-1, -1, -1]] [0]
        >>> td["action"] = torch.tensor(4)
        >>> td = env.step(td)
        >>> print(td["next", "board"][1].tolist(), td["next", "turn"].tolist())
        [-1, 0, -1] [1]
        >>> print(env.rollout(10).shape[0] <= 9)
        True
        >>> games = env.reset(TensorDict(batch_size=[5]))
        >>> print(games["mask"].shape)
        torch.Size([5, 9])
    """

    batch_locked = False

    def __init__(
        self, *, single_player: bool = False, device: torch.device | str | int | None = None
    ) -> None:
        super().__init__(device=device)
        self.single_player = single_player
        self.rng = seeded_generator(None)
        self.action_spec = Categorical(n=9, shape=(), device=device)
        self.observation_spec = Composite(
            board=Unbounded(shape=(3, 3), dtype=torch.int32, device=device),
            turn=Categorical(2, shape=(1,), dtype=torch.int32, device=device),
            mask=Categorical(2, shape=(9,), dtype=torch.bool, device=device),
            device=device,
        )
        self.state_spec = self.observation_spec.clone()
        self.full_reward_spec = Composite(
            {
                ("player0", "reward"): Unbounded(shape=(1,), device=device),
                ("player1", "reward"): Unbounded(shape=(1,), device=device),
            },
            device=device,
        )
        flag = Categorical(2, shape=(1,), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), device=device
        )
        self._lines = _LINES.to(device) if device is not None else _LINES

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        shape = tensordict.shape if tensordict is not None else self.batch_size
        device = self.device
        flag = torch.zeros((*shape, 1), dtype=torch.bool, device=device)
        return TensorDict(
            {
                "board": torch.full((*shape, 3, 3), _EMPTY, dtype=torch.int32, device=device),
                "turn": torch.zeros((*shape, 1), dtype=torch.int32, device=device),
                "mask": torch.ones((*shape, 9), dtype=torch.bool, device=device),
                "done": flag,
                "terminated": flag.clone(),
                "truncated": flag.clone(),
            },
            batch_size=shape,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        board, turn, mask, action = _read_inputs(tensordict)
        _check_legal(action, mask)
        board, mask, wins, done = self._play(board, action)
        # the mover (turn) gains what the other player loses
        reward0 = wins.unsqueeze(-1) * (1 - 2 * turn).float()
        turn = 1 - turn
        if self.single_player:
            answer = ~done
            if answer.any():
                reply = self._random_cells(mask)
                board2, mask2, wins2, done2 = self._play(board, reply)
                reward0 = reward0 - (wins2 & answer).unsqueeze(-1).float()
                board = torch.where(answer[..., None, None], board2, board)
                mask = torch.where(answer.unsqueeze(-1), mask2, mask)
                done = torch.where(answer, done2, done)
                turn = torch.where(answer.unsqueeze(-1), 1 - turn, turn)
        done = done.unsqueeze(-1)
        return TensorDict(
            {
                "board": board,
                "turn": turn,
                "mask": mask,
                ("player0", "reward"): reward0,
                ("player1", "reward"): -reward0,
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
            },
            batch_size=tensordict.batch_size,
        )

    def _play(
        self, board: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Put the mover's stone on ``action``; return the next player's view."""
        flat = board.flatten(-2).clone()
        flat.scatter_(-1, action.unsqueeze(-1), _OWN)
        wins = (flat[..., self._lines] == _OWN).all(-1).any(-1)
        mask = flat == _EMPTY
        done = wins | ~mask.any(-1)
        # swap the roles: the next player's stones become ``1``
        flat = torch.where(mask, flat, 1 - flat)
        return flat.unflatten(-1, (3, 3)), mask & ~done.unsqueeze(-1), wins, done

    def _random_cells(self, mask: torch.Tensor) -> torch.Tensor:
        """One uniformly drawn legal cell per game (cell 0 where none is legal)."""
        weights = mask.reshape(-1, 9).float()
        weights[:, 0] += ~mask.reshape(-1, 9).any(-1)
        cells = torch.multinomial(weights.cpu(), 1, generator=self.rng)
        return cells.to(mask.device).reshape(mask.shape[:-1])

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a uniformly drawn ``"action"`` into ``tensordict``.

        The cells are drawn among those flagged by the ``"mask"`` entry when there is
        one, among all nine otherwise.

        Args:
            tensordict (TensorDictBase, optional): the current game(s). Defaults to
                ``None`` (a fresh game from :meth:`reset`).

        Returns:
            The tensordict, with its ``"action"`` entry set.
        """
        if tensordict is None:
            tensordict = self.reset()
        mask = tensordict.get("mask", None)
        if mask is None:  # no mask: any of the 9 cells
            mask = torch.ones((*tensordict.batch_size, 9), dtype=torch.bool)
        tensordict.set("action", self._random_cells(mask))
        return tensordict

    def _set_seed(self, seed: int | None) -> None:
        self.rng = seeded_generator(seed)


def _read_inputs(
    tensordict: TensorDictBase,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    try:
        board, turn = tensordict["board"], tensordict["turn"]
        mask, action = tensordict["mask"], tensordict["action"]
    except KeyError:
        missing = [k for k in ("board", "turn", "mask", "action") if k not in tensordict.keys()]
        raise KeyError(
            f"TicTacToeEnv.step expected the entries board, turn, mask and action; "
            f"missing {missing}, present {entry_names(tensordict)}. "
            f"Step the output of env.reset() (or of the previous step) with an action."
        ) from None
    if action.dtype in (torch.bool, torch.uint8) or action.is_floating_point():
        raise TypeError(
            f"TicTacToeEnv expected an integer 'action' (a cell index in 0..8), got "
            f"dtype={action.dtype}. Convert it with action.long()."
        )
    if action.shape != tensordict.batch_size:
        raise ValueError(
            f"TicTacToeEnv expected 'action' of shape {list(tensordict.batch_size)} (one cell "
            f"index per game), got shape {list(action.shape)}. A one-hot action can be "
            f"converted with action.argmax(-1); a trailing singleton with action.squeeze(-1)."
        )
    return board, turn, mask, action


def _check_legal(action: torch.Tensor, mask: torch.Tensor) -> None:
    in_range = (action >= 0) & (action < 9)
    legal = in_range & mask.gather(-1, action.clamp(0, 8).unsqueeze(-1)).squeeze(-1)
    if not bool(legal.all()):
        index = (~legal).nonzero()[0].tolist()
        cell = int(action[tuple(index)])
        free = mask[tuple(index)].nonzero().flatten().tolist()
        raise ValueError(
            f"TicTacToeEnv received an illegal move: cell {cell} at batch index {index} "
            f"(legal cells there: {free}). Play an empty cell, flagged by the 'mask' entry "
            f"(env.rand_action(td) samples one); reset the game once it is done."
        )
