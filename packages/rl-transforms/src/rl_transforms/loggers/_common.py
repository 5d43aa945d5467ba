"""The :class:`Logger` base class: the interface every experiment logger implements."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase


def scalar_items(
    metrics: Mapping[str, Any] | TensorDictBase, keys_sep: str
) -> list[tuple[str, Any]]:  # Any: a number, a tensor or any value a backend accepts
    """Flatten ``metrics`` into ``(name, python value)`` pairs; tensors become numbers or lists."""
    if isinstance(metrics, TensorDictBase):
        items = [
            (key if isinstance(key, str) else keys_sep.join(key), value)
            for key, value in metrics.items(True, True)
        ]
    else:
        items = list(metrics.items())
    out = []
    for name, value in items:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            value = value.item() if value.numel() == 1 else value.tolist()
        out.append((name, value))
    return out


def no_histograms(owner: str, name: str) -> NotImplementedError:
    """The error of a logger whose backend stores no histograms."""
    return NotImplementedError(
        f"{owner} cannot log histograms (asked for {name!r}). Use TensorboardLogger or "
        f"WandbLogger, or log summary statistics with log_scalar."
    )


class Logger(abc.ABC):
    """A template for loggers.

    A logger writes scalars, videos, hyperparameters and histograms of one
    experiment. Subclasses create their backend's experiment object in
    :meth:`_create_experiment` (kept as :attr:`experiment`) and implement the
    ``log_*`` methods.

    Args:
        exp_name (str): the name of the experiment.
        log_dir (str): where the logs go (a folder, or the backend's location).

    Examples:
        >>> class ListLogger(Logger):
        ...     def _create_experiment(self):
        ...         return []
        ...     def log_scalar(self, name, value, step=None):
        ...         self.experiment.append((name, value, step))
        ...     def log_video(self, name, video, step=None, **kwargs):
        ...         pass
        ...     def log_hparams(self, cfg):
        ...         pass
        ...     def log_histogram(self, name, data, **kwargs):
        ...         pass
        ...     def __repr__(self):
        ...         return "ListLogger()"
        >>> logger = ListLogger(exp_name="exp", log_dir="unused")
        >>> logger.log_metrics({"loss": torch.tensor(0.5), "lr": 1e-3}, step=3)
        {'loss': 0.5, 'lr': 0.001}
        >>> logger.experiment
        [('loss', 0.5, 3), ('lr', 0.001, 3)]
    """

    def __init__(self, exp_name: str, log_dir: str) -> None:
        if not isinstance(exp_name, str) or not exp_name:
            raise ValueError(
                f"{type(self).__name__} expected exp_name to be a non-empty string, got "
                f"{exp_name!r}. Name the experiment, e.g. generate_exp_name('model', 'run')."
            )
        self.exp_name = exp_name
        self.log_dir = log_dir
        self.experiment = self._create_experiment()

    @abc.abstractmethod
    def _create_experiment(self) -> Any:  # Any: the backend's experiment object
        """Create the backend's experiment object."""

    @abc.abstractmethod
    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Log one scalar ``value`` under ``name`` at ``step``."""

    @abc.abstractmethod
    def log_video(
        self,
        name: str,
        video: torch.Tensor,
        step: int | None = None,
        **kwargs: Any,  # Any: backend-specific writer options
    ) -> None:
        """Log a video, a ``[N, T, C, H, W]`` uint8 tensor, under ``name``."""

    @abc.abstractmethod
    def log_hparams(self, cfg: Mapping[str, Any]) -> None:  # Any: any hyperparameter value
        """Log the hyperparameters ``cfg`` of the experiment."""

    @abc.abstractmethod
    def log_histogram(
        self,
        name: str,
        data: Sequence | torch.Tensor,
        **kwargs: Any,  # Any: backend-specific options (step, bins)
    ) -> None:
        """Log a histogram of ``data`` under ``name``."""

    @abc.abstractmethod
    def __repr__(self) -> str: ...

    def log_metrics(
        self,
        metrics: Mapping[str, Any] | TensorDictBase,  # Any: numbers or tensors
        step: int | None = None,
        *,
        keys_sep: str = "/",
    ) -> dict[str, Any]:  # Any: python numbers or lists
        """Log several scalars at once; returns them as python values.

        Args:
            metrics (dict or TensorDictBase): names to values (numbers or tensors);
                nested tensordict keys are joined with ``keys_sep``.
            step (int, optional): the step of every value. Defaults to ``None``.

        Keyword Args:
            keys_sep (str, optional): separator of nested keys. Defaults to ``"/"``.
        """
        items = scalar_items(metrics, keys_sep)
        for name, value in items:
            self.log_scalar(name, value, step=step)
        return dict(items)
