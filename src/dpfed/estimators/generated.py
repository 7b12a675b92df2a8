"""Estimators generated from a protocol's in-process training.

A registered protocol that declares how it trains in one process
(:class:`dpfed.protocols.base.Training`) has a scikit-learn classifier,
:func:`estimator_for` ``(name)``, built from that declaration:

* its parameters are ``n_<parties>`` (how many parts the rows are cut into), every field of
  the protocol's configuration but ``seed`` and the fields the training fixes, each with its
  declared default (or the training's own) and help, and ``random_state`` (the seed of the
  split and of the noise). ``__init__`` stores them and nothing else, and its signature names
  them all, as scikit-learn's ``get_params`` reads it;
* ``fit`` cuts the rows into parts (each row scaled to unit norm), builds the configuration
  from the parameters and trains; ``coef_``, ``intercept_``, ``history_``,
  ``privacy_spent_`` and ``result_`` hold what it learned.

The class is named by the training (:attr:`~dpfed.protocols.base.Training.estimator`) and
lives in this module, where pickling finds it again by name (:func:`__getattr__` builds it on
first use in a fresh process).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from dpfed.estimators._base import config_of, refuse_fit_params
from dpfed.estimators.rows import RowClassifier
from dpfed.parameters import Parameter, parameters
from dpfed.protocols.base import Training, get_training, trainings

__all__ = ["estimator_class", "estimator_for"]

#: How many parts the rows are cut into, by default.
DEFAULT_PARTIES = 10


def _type_name(p: Parameter) -> str:
    shown = {bool: "bool", int: "int", float: "float", str: "str", tuple: "tuple"}.get(
        p.kind, p.kind.__name__
    )
    if p.info.choices is not None:
        shown = "{" + ", ".join(f'"{c}"' for c in p.info.choices) + "}"
    return f"{shown} or None" if p.optional else shown


def _fields(training: Training) -> list[Parameter]:
    """The configuration's fields the estimator takes as parameters, in declaration order."""
    return [
        p for p in parameters(training.config) if p.name != "seed" and p.name not in training.fixed
    ]


def _docstring(training: Training) -> str:
    count = f"n_{training.parties}"
    lines = [
        f"{training.summary[0].upper()}{training.summary[1:]}.",
        "",
        f"{training.description} Generated from the protocol's in-process training",
        "(:mod:`dpfed.estimators.generated`).",
        "",
        "Parameters",
        "----------",
        f"{count} : int",
        f"    How many {training.parties} the rows are cut into, at random with",
        "    ``random_state``.",
    ]
    for p in _fields(training):
        lines += [f"{p.name} : {_type_name(p)}", f"    {p.info.help[0].upper()}{p.info.help[1:]}."]
    lines += [
        "random_state : int or None",
        "    Seeds the split of the rows and the noise.",
        "",
        "Attributes",
        "----------",
        "classes_ : ndarray, shape (2,)",
        "    The two labels seen in ``fit``, sorted; ``classes_[1]`` is the positive class (+1).",
        "n_features_in_ : int",
        "    Columns of ``X`` in ``fit``.",
        "coef_ : ndarray, shape (1, n_features)",
        "    The model's weights of the rows scaled to unit norm.",
        "intercept_ : ndarray, shape (1,)",
        "    Its intercept (0 without one).",
        "history_ : list of dict",
        "    One entry per round.",
        "privacy_spent_ : dict",
        "    Every party's privacy spent.",
        "result_ : object",
        "    The protocol's whole result.",
    ]
    return "\n".join(lines)


@functools.cache
def estimator_class(training: Training) -> type[RowClassifier]:
    """The scikit-learn classifier generated from ``training`` (one class per training)."""
    count = f"n_{training.parties}"
    fields = _fields(training)
    keyword = inspect.Parameter.KEYWORD_ONLY
    signature = inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter(
                count, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=DEFAULT_PARTIES
            ),
            *(
                inspect.Parameter(p.name, keyword, default=training.defaults.get(p.name, p.default))
                for p in fields
            ),
            inspect.Parameter("random_state", keyword, default=None),
        ]
    )
    names = [count, *(p.name for p in fields), "random_state"]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name in names:
            setattr(self, name, bound.arguments[name])

    __init__.__signature__ = signature  # type: ignore[attr-defined]

    def _adds_noise(self: Any) -> bool:
        return bool(training.adds_noise(self))

    def fit(self: Any, X: Any, y: Any, **fit_params: Any) -> Any:
        """Cut the rows into parts, one per party, and train by the protocol.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            At least as many rows as parties.
        y : array-like, shape (n_samples,)
            Two distinct labels of any type; ``classes_[0]`` is trained as -1 and
            ``classes_[1]`` as +1.

        Returns
        -------
        self
            Fitted.
        """
        refuse_fit_params(self, fit_params)
        X, y_pm = self._validate_fit(X, y)
        config = config_of(self, training.config, **training.fixed).validated()
        parts = self._parts(X, y_pm, getattr(self, count), self.random_state, count)
        result = training.train(parts, config)
        self.result_ = result
        self._set_model(result.model, config)
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        return self

    namespace = {
        "__init__": __init__,
        "_adds_noise": _adds_noise,
        "fit": fit,
        "__doc__": _docstring(training),
        "__module__": __name__,
        "__qualname__": training.estimator,
    }
    cls = type(training.estimator, (RowClassifier,), namespace)
    if training.estimator in globals():
        raise TypeError(
            f"two trainings generate an estimator named {training.estimator!r}; each needs "
            "its own name."
        )
    globals()[training.estimator] = cls  # where pickling and the docs find it by name
    return cls


def estimator_for(name: str) -> type[RowClassifier]:
    """The scikit-learn classifier of registered protocol ``name``, generated from its
    in-process training (:func:`estimator_class`).

    Raises
    ------
    DpfedInputError
        If the protocol is not registered or declares no in-process training.
    """
    return estimator_class(get_training(name))


def __getattr__(name: str) -> type[RowClassifier]:
    """A generated estimator by its class name (how pickling finds it again)."""
    for training in trainings().values():
        if training.estimator == name:
            return estimator_class(training)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
