"""A protocol's whole interface: how it runs over the network and how it trains in one process.

:class:`BaseProtocol` is the networked runtime's
:class:`~dpfed.runtime.registry.FederatedProtocol` (parameters, parties, messages, hosts,
result: all the runtime reads) plus one member the runtime never reads, :attr:`training`: how
the protocol trains in one process. A protocol that declares it gets, generated from that
declaration and its configuration's parameters,

* the command ``dpfed train <name>`` (data options, one option per configuration field, the
  engine options; it writes the result JSON): :func:`dpfed.cli.train.add_generated_train`;
* a scikit-learn classifier: :func:`dpfed.estimators.estimator_for`.

Every protocol is found through the one registry,
:data:`~dpfed.runtime.registry.PROTOCOL_REGISTRY`: :func:`trainings` asks each registered
protocol for its declaration, so adding a protocol with a command and an estimator touches its
own package and one registry line (docs/design.md, "Adding a protocol").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.runtime.registry import PROTOCOL_REGISTRY, FederatedProtocol, get_protocol

__all__ = ["BaseProtocol", "LinearResult", "Training", "get_training", "trainings"]


class LinearResult(Protocol):
    """What a protocol's in-process training returns: one linear model and its record."""

    #: The model over the rows as the parties trained on them, intercept weight included:
    #: the configuration's ``intercept_of`` splits it into ``(coef, intercept)``.
    model: np.ndarray
    #: One entry per round (figures computed from released values).
    history: list[dict[str, Any]]
    #: The privacy spent: ``mechanism`` (``"none"`` without one) and, with one, what
    #: :func:`dpfed.cli.common.privacy_line` prints (``epsilon``, ``delta``, per party).
    privacy: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The result file's content: at least ``final`` (the last history entry, whose
        ``iteration``, ``train_objective``, ``test_log_loss`` and ``test_accuracy`` the
        command prints when present) and ``privacy``."""
        ...


def _adds_noise(config: Any) -> bool:
    return getattr(config, "mechanism", "none") != "none"


@dataclass(frozen=True, eq=False)  # one declaration per protocol, hashed by identity
class Training:
    r"""How a row-holding protocol trains a binary linear classifier in one process.

    The parties each hold some rows: the command and the estimator cut a data set's rows
    (each scaled to norm 1, the bound every row protocol's sensitivity assumes) into
    ``n`` parts at random, call :attr:`train` and read a linear model from its result.

    Attributes
    ----------
    config : type
        The configuration dataclass, every field declared with :func:`dpfed.parameters.param`
        (the command's options and the estimator's parameters are its fields). Its instances
        have ``validated()`` (the rules between fields; returns the configuration) and
        ``intercept_of(model) -> (coef, intercept)``.
    train : callable
        ``train(parts, config, *, X_test=None, y_test=None, progress=False, engine=None)``:
        ``parts`` is a list of ``(X_k, y_k)``, party ``k``'s rows, shape ``(m_k, d)``, of
        norm at most 1, and labels in {-1, +1}, shape ``(m_k,)``; ``X_test, y_test`` held-out
        rows for the per-round figures; ``engine`` where the roles run
        (:func:`dpfed.engines.get_engine`). Returns a :class:`LinearResult`.
    summary : str
        One line for ``dpfed train --help``.
    description : str
        The command's description.
    estimator : str
        The generated estimator class's name (e.g. ``"ConsensusLogisticRegression"``).
    parties : str
        What the parties are called: the command's ``--<parties>`` option and the estimator's
        ``n_<parties>`` parameter (``"clients"``).
    defaults : mapping of str to Any
        The command's and the estimator's defaults where they differ from the configuration's.
    fixed : mapping of str to Any
        Fields the estimator fixes (a logistic regression's ``loss``); the command keeps them
        as options.
    adds_noise : callable
        ``adds_noise(config) -> bool``: whether a configuration adds privacy noise (default:
        its ``mechanism`` is not ``"none"``).
    """

    config: type[Any]
    train: Callable[..., LinearResult]
    summary: str
    description: str
    estimator: str
    parties: str = "clients"
    defaults: Mapping[str, Any] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    adds_noise: Callable[[Any], bool] = _adds_noise


class BaseProtocol(FederatedProtocol):
    """A protocol of this package: the networked interface, and optionally how it trains in
    one process."""

    #: How it trains in one process (a :class:`Training`), from which its command and its
    #: estimator are generated; None (the default): it has no generated command or estimator.
    training: Training | None = None


def trainings() -> dict[str, Training]:
    """Every registered protocol's in-process training, by protocol name, in registry order
    (a protocol without one is left out)."""
    out: dict[str, Training] = {}
    for name in PROTOCOL_REGISTRY:
        protocol = get_protocol(name)
        training = getattr(protocol, "training", None)
        if isinstance(training, Training):
            out[name] = training
    return out


def get_training(name: str) -> Training:
    """The in-process training of the registered protocol ``name``.

    Raises
    ------
    DpfedInputError
        If no protocol of that name is registered, or it declares no in-process training
        (naming those that do).
    """
    protocol = get_protocol(name)
    training = getattr(protocol, "training", None)
    if not isinstance(training, Training):
        raise DpfedInputError(
            f"protocol {name!r} has no in-process training. Protocols with one: "
            f"{sorted(trainings())}."
        )
    return training
