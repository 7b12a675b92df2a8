"""Run a vertical (ADMM sharing) job: build the roles, calibrate the noise, run, evaluate.

:func:`train_vertical` is what ``dpfed train vertical`` and the estimator call. It runs the
roles of :mod:`dpfed.protocols.vertical` over the in-process transport; the networked
runtime drives the same roles over sockets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dpfed._validation import (
    DpfedInputError,
    check_binary_labels,
    check_finite_matrix,
    check_positive,
    check_same_rows,
)
from dpfed.core.admm import ResidualBalancing
from dpfed.core.losses import Loss, get_loss
from dpfed.core.regularizers import get_regularizer
from dpfed.core.rows import DEFAULT_INTERCEPT_SCALE, Matrix, with_intercept
from dpfed.core.threads import vector_work
from dpfed.engines import Engine, EngineReport, engine_block, engine_summary, get_engine
from dpfed.parameters import check_params, param
from dpfed.privacy.accountants import accountant_names, calibrate, releases_event
from dpfed.privacy.accounting import (
    Release,
    analytic_gaussian_multiplier,
    gaussian_releases_epsilon,
)
from dpfed.privacy.coupling import SAMPLER, calibration_delta
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger
from dpfed.privacy.noise_source import simulation_generator
from dpfed.protocols.vertical.calibration import (
    EigenvaluePremise,
    SoundBounds,
    local_model_strong_convexity,
    paper_epsilon_reasons,
    sound_defaults,
    split_noise_multiplier,
)
from dpfed.protocols.vertical.evaluation import round_metrics
from dpfed.protocols.vertical.mechanisms import (
    MECHANISMS,
    DualRelease,
    NoPrivacy,
    PaperMechanism,
    PartyMechanism,
    SoundMechanism,
    corollary1_step_epsilon,
)
from dpfed.protocols.vertical.roles import LabelHolder, PassiveParty, RoundRecord
from dpfed.protocols.vertical.weighting import (
    STATISTICS,
    STATISTICS_SHARE,
    StatisticsRelease,
    supports_weighting,
)
from dpfed.runtime.disclosure import exact_values, in_process_seed_note, with_exact_values
from dpfed.runtime.progress import progress_bar

if TYPE_CHECKING:
    from dpfed.privacy.accountants import DpEvent

#: The accountants a vertical job may use: the numerical ones, which read every release it
#: makes (Gaussian, l2-Laplace and grid noise) at every noise multiplier.
VERTICAL_ACCOUNTANTS = accountant_names(numerical=True)
#: The label holder's acceleration of the rounds: ``none`` (plain ADMM sharing), ``relaxed``
#: (over-relaxed z- and dual updates), ``anderson`` (over-relaxed, plus safeguarded Anderson
#: acceleration of the round map).
ACCELERATIONS = ("none", "relaxed", "anderson")
#: Over-relaxation of ``relaxed`` and ``anderson`` (Boyd et al. 2011, section 3.4.3: 1.5-1.8).
RELAXATION = 1.6
#: Memory of ``anderson``.
ANDERSON_MEMORY = 5
#: Default warm start of an accelerated job without noise (rounds on the label holder's block).
ACCELERATED_WARM_START = 5


@dataclass(frozen=True)
class VerticalConfig:
    """Everything a vertical job needs besides the data.

    Parameters
    ----------
    loss, regularizer : str
        Names from :data:`dpfed.core.LOSSES` and :data:`dpfed.core.REGULARIZERS`.
    lam : float
        Regularisation weight of the averaged objective
        :math:`\\frac1N \\sum_i \\ell(z_i) + \\lambda \\sum_m R(x_m)`.
    rho : float or None
        ADMM penalty of the summed form (``N`` times the averaged one); default: the loss's
        smoothness bound (1/4 for logistic), or 1.
    iterations : int or None
        ADMM rounds (the privacy calibration assumes all of them run); default 20, or for the
        sound mechanism the public rule :func:`dpfed.protocols.vertical.calibration.sound_defaults`.
    mechanism : {"none", "paper", "sound"}
    epsilon, delta : float or None
        Target total privacy; ``delta`` is also the delta at which spending is reported.
    noise_multiplier : float or None
        Sound mechanism, instead of a target epsilon: the per-round noise multiplier (noise
        standard deviation over the enforced L2 sensitivity, before the model/scores split).
    noise_sigma : float or None
        Paper mechanism, instead of a target epsilon: the paper's sigma, the absolute standard
        deviation of its Gaussian (not a multiplier: the paper scales no sensitivity by it).
    accountant : {"pld", "rdp"}
        Accountant of the sound mechanism (the paper mechanism certifies no epsilon; it reports
        the paper's Corollary 1 formula and a PLD figure as ``paper_epsilon*``).
    seed : int or None
        Seeds every party's noise generator (one spawned stream per party).
    adaptive_rho : bool or None
        Residual balancing; default on without noise and off with it.
    tol : (float, float) or None
        Absolute and relative stopping tolerances (None: run all iterations).
    bounds : SoundBounds or None
        Enforced bounds of the sound mechanism; default from
        :func:`dpfed.protocols.vertical.calibration.sound_defaults` (a function of epsilon and
        N only).
    model_fraction : float or None
        Share of each round's privacy budget spent on the model release (sound); default
        from :func:`dpfed.protocols.vertical.calibration.sound_defaults`.
    score_rounds : int or None
        Sound mechanism: rounds ``1..score_rounds`` release scores (default ``T - 1``; the
        last round's scores never reach a model).
    protect_label_holder : bool
        Sound mechanism: also protect the label holder's rows and labels (noisy broadcast).
    b1 : float or None
        Paper mechanism's radius for x, y and z; default ``5 sqrt(N)``.
    warm_start_rounds : int or None
        Local-only rounds of the label holder before the first broadcast (free: nothing
        leaves); default 30 for the sound mechanism without label-holder protection, 5 for an
        accelerated job without noise, else 0.
    acceleration : {"none", "relaxed", "anderson"} or None
        How the label holder speeds up the rounds (:data:`ACCELERATIONS`): ``relaxed``
        over-relaxes the z- and dual updates by :data:`RELAXATION`; ``anderson`` adds
        safeguarded Anderson acceleration (memory :data:`ANDERSON_MEMORY`) of the round map.
        Both are functions of the released scores and the label holder's own data, so the
        passive parties' analysis is unchanged. Default ``anderson`` without a mechanism,
        ``none`` with one (so private runs are the plain protocol); refused with the paper
        mechanism and with ``protect_label_holder``.
    passive_weighting : bool or None
        Sound mechanism: the label holder weighs the passive parties' final models by a factor
        in [0, 1] chosen from released statistics so that the model's training loss stays
        below its local-only model's (:mod:`dpfed.protocols.vertical.weighting`; one more
        small release per passive party, accounted). Default: on for the sound mechanism
        without label-holder protection, for a loss of bounded slope and curvature.
    fit_intercept : bool or None
        An intercept, held by the label holder: its rows become
        :math:`[\\sqrt{1 - c^2}\\,x,\\ cR]` after they are bounded to norm :math:`R`
        (:meth:`~dpfed.protocols.vertical.mechanisms.PartyMechanism.prepare_block`), so every
        sensitivity holds unchanged and the intercept, :math:`cR` times the last weight, is
        regularised with the other weights. Default: on, except under the paper mechanism
        (whose algorithm and reproduction have none).
    intercept_scale : float
        :math:`c \\in (0, 1)`.
    """

    loss: str = param(
        "logistic",
        help="loss of the label holder's z-update",
        choices=("logistic", "squared", "smoothed_hinge", "sigmoid"),
    )
    regularizer: str = param(
        "l2", help="regulariser of every party's block", choices=("l2", "l1", "elasticnet")
    )
    lam: float = param(
        1e-4,
        help="regularisation weight of the averaged objective",
        interval=(0, None),
        closed="left",
    )
    rho: float | None = param(help="ADMM penalty (summed-loss form)", interval=(0, None))
    iterations: int | None = param(
        help="ADMM rounds (default 20, or the sound mechanism's public rule)",
        interval=(1, None),
        closed="left",
    )
    mechanism: str = param("none", help="privacy mechanism", choices=MECHANISMS)
    epsilon: float | None = param(help="target total epsilon", interval=(0, None))
    delta: float | None = param(help="target total delta", interval=(0, 1))
    noise_multiplier: float | None = param(
        help="instead of epsilon: the sound mechanism's per-round noise multiplier",
        interval=(0, None),
    )
    noise_sigma: float | None = param(
        help="instead of epsilon: the paper mechanism's sigma (absolute noise scale)",
        interval=(0, None),
    )
    accountant: str = param(
        "pld", help="accountant of the sound mechanism", choices=VERTICAL_ACCOUNTANTS
    )
    seed: int | None = param(
        help="seed of every party's noise (in process or a simulation)", public=False
    )
    adaptive_rho: bool | None = param(help="residual balancing (default: on without noise)")
    tol: tuple[float, float] | None = param(
        help="absolute and relative tolerances: stop once the residuals fall below them",
        metavar=("ABS", "REL"),
    )
    bounds: SoundBounds | None = param(
        help="the sound mechanism's enforced bounds (default: a public rule of epsilon and N)"
    )
    model_fraction: float | None = param(
        help="share of each round's budget spent on the model release (sound)",
        interval=(0, 1),
    )
    protect_label_holder: bool = param(
        False, help="also protect the label holder's rows and labels (sound)"
    )
    b1: float | None = param(
        help="the paper mechanism's radius of x, y and z (default 5 sqrt N)", interval=(0, None)
    )
    warm_start_rounds: int | None = param(
        help="local-only rounds of the label holder before the first broadcast",
        interval=(0, None),
        closed="left",
    )
    inner_iterations: int = param(
        100, help="iterations of an inexact x-update", interval=(1, None), closed="left"
    )
    score_rounds: int | None = param(
        help="sound: rounds 1..score_rounds release scores (default T - 1)",
        interval=(0, None),
        closed="left",
    )
    acceleration: str | None = param(
        help="the label holder's acceleration of the rounds (default: anderson without noise, "
        "none with it)",
        choices=ACCELERATIONS,
    )
    passive_weighting: bool | None = param(
        help="sound: weigh the passive models so the result is never worse than local-only"
    )
    fit_intercept: bool | None = param(
        help="fit an intercept, held by the label holder: its rows get a constant column "
        "(regularised with the other weights); default on, off under the paper "
        "mechanism (the paper's algorithm)"
    )
    intercept_scale: float = param(
        DEFAULT_INTERCEPT_SCALE,
        help="c in (0, 1): the label holder's rows become [sqrt(1 - c^2) x, c R], R their bound",
        interval=(0, 1),
    )

    def validated(self) -> VerticalConfig:
        """Check every value (each against its declaration, :func:`~dpfed.parameters.
        check_params`, then the rules between fields); return the config with defaults
        resolved."""
        check_params(self)
        fit_intercept, loss = _check_objective(self)
        iterations, model_fraction = _resolve_rounds(self)
        rho = _resolve_rho(self, loss)
        private = _check_budget(self)
        adaptive = _check_protection(self, loss, private)
        acceleration, warm = _resolve_acceleration(self, private)
        weighting = _resolve_weighting(self, loss)
        return replace(
            self,
            rho=float(rho),
            adaptive_rho=adaptive,
            fit_intercept=fit_intercept,
            warm_start_rounds=int(warm),
            acceleration=acceleration,
            iterations=int(iterations),
            model_fraction=float(model_fraction),
            passive_weighting=bool(weighting),
        )


# The checks of VerticalConfig.validated, by concern, in the order it makes them.


def _check_objective(cfg: VerticalConfig) -> tuple[bool, Loss]:
    """The intercept (resolved), the loss, the regulariser and ``lam``."""
    fit_intercept = (
        cfg.mechanism != "paper" if cfg.fit_intercept is None else bool(cfg.fit_intercept)
    )
    if fit_intercept:
        with_intercept(np.zeros((1, 1)), cfg.intercept_scale)  # checks c in (0, 1)
    loss = get_loss(cfg.loss)
    get_regularizer(cfg.regularizer)
    return fit_intercept, loss


def _resolve_rounds(cfg: VerticalConfig) -> tuple[int, float]:
    """The rounds and the model's budget share (defaults: the sound mechanism's public rule),
    and the score rounds."""
    rule = (
        sound_defaults(cfg.epsilon, 1, protect_label_holder=cfg.protect_label_holder)
        if cfg.mechanism == "sound" and (cfg.epsilon is None or cfg.epsilon > 0)
        else None
    )
    iterations = cfg.iterations
    if iterations is None:
        iterations = rule.iterations if rule is not None else 20
    model_fraction = cfg.model_fraction
    if model_fraction is None:
        model_fraction = rule.model_fraction if rule is not None else 0.5
    return iterations, model_fraction


def _resolve_rho(cfg: VerticalConfig, loss: Loss) -> float:
    """The ADMM penalty (default: the loss's smoothness bound, or 1), checked for ``loss``."""
    rho = cfg.rho
    if rho is None:
        smooth_convex = math.isfinite(loss.smoothness) and loss.weak_convexity == 0
        rho = loss.smoothness if smooth_convex else 1.0
    check_positive("rho", rho)
    loss.check_rho(rho)
    return rho


def _check_budget(cfg: VerticalConfig) -> bool:
    """Epsilon, delta and the noise scales against the mechanism; whether it is private."""
    private = cfg.mechanism != "none"
    # each mechanism names its own noise scale: a multiplier of the enforced sensitivity
    # (sound) or the paper's absolute sigma (paper)
    scales = {"noise_multiplier": cfg.noise_multiplier, "noise_sigma": cfg.noise_sigma}
    noise_name = "noise_sigma" if cfg.mechanism == "paper" else "noise_multiplier"
    other_name = "noise_multiplier" if cfg.mechanism == "paper" else "noise_sigma"
    noise_given = any(v is not None for v in scales.values())
    if not private and (cfg.epsilon is not None or noise_given):
        raise DpfedInputError(
            "epsilon, noise_multiplier and noise_sigma need a privacy mechanism (paper or "
            f"sound). Found mechanism {cfg.mechanism!r}."
        )
    if private:
        if cfg.delta is None:
            raise DpfedInputError(f"the {cfg.mechanism} mechanism needs delta. Found none.")
        if scales[other_name] is not None:
            raise DpfedInputError(
                f"{other_name} belongs to the other mechanism; the {cfg.mechanism} "
                f"mechanism takes {noise_name}. Found {other_name}={scales[other_name]}."
            )
        noise = scales[noise_name]
        if (cfg.epsilon is None) == (noise is None):
            raise DpfedInputError(
                f"the {cfg.mechanism} mechanism takes exactly one of epsilon or "
                f"{noise_name}. Found epsilon={cfg.epsilon}, {noise_name}={noise}."
            )
    return private


def _check_protection(cfg: VerticalConfig, loss: Loss, private: bool) -> bool:
    """Adaptive rho (resolved) and the stopping rule against ``protect_label_holder``, which
    needs the sound mechanism and a loss of bounded slope; returns adaptive rho."""
    adaptive = (not private) if cfg.adaptive_rho is None else bool(cfg.adaptive_rho)
    if adaptive and cfg.protect_label_holder:
        raise DpfedInputError(
            "adaptive rho reads the label holder's private residuals; it cannot be used "
            "with protect_label_holder."
        )
    if cfg.tol is not None and cfg.protect_label_holder:
        raise DpfedInputError(
            "stopping on residuals reads the label holder's private state; it cannot be "
            "used with protect_label_holder."
        )
    if cfg.protect_label_holder and cfg.mechanism != "sound":
        raise DpfedInputError(
            f"protect_label_holder is part of the sound mechanism. Found {cfg.mechanism!r}."
        )
    if cfg.protect_label_holder and (loss.lipschitz is None or not math.isfinite(loss.lipschitz)):
        raise DpfedInputError(
            "protect_label_holder releases the label holder's local model, whose "
            "sensitivity needs a loss of bounded slope (logistic, smoothed_hinge, sigmoid). "
            f"Found {cfg.loss!r}."
        )
    return adaptive


def _resolve_acceleration(cfg: VerticalConfig, private: bool) -> tuple[str, int]:
    """The acceleration and the warm start rounds, resolved and checked."""
    acceleration = cfg.acceleration
    if acceleration is None:
        acceleration = "anderson" if not private else "none"
    if acceleration != "none" and (cfg.protect_label_holder or cfg.mechanism == "paper"):
        raise DpfedInputError(
            "acceleration changes the broadcast dual, whose analysis (protect_label_holder) "
            "or ball (the paper mechanism) assumes plain rounds. Found acceleration "
            f"{acceleration!r} with mechanism {cfg.mechanism!r}"
            f"{' and protect_label_holder' if cfg.protect_label_holder else ''}."
        )
    warm = cfg.warm_start_rounds
    if warm is None:
        if cfg.mechanism == "sound" and not cfg.protect_label_holder:
            warm = 30
        elif not private and acceleration != "none":
            warm = ACCELERATED_WARM_START
        else:
            warm = 0
    if warm and cfg.protect_label_holder:
        raise DpfedInputError("a warm start would release the label holder's exact model.")
    return acceleration, warm


def _resolve_weighting(cfg: VerticalConfig, loss: Loss) -> bool:
    """Passive weighting, resolved and checked."""
    weighting = cfg.passive_weighting
    if weighting is None:
        weighting = (
            cfg.mechanism == "sound" and not cfg.protect_label_holder and supports_weighting(loss)
        )
    if weighting and cfg.mechanism != "sound":
        raise DpfedInputError(
            f"passive_weighting is part of the sound mechanism. Found {cfg.mechanism!r}."
        )
    if weighting and cfg.protect_label_holder:
        raise DpfedInputError(
            "passive_weighting broadcasts exact derivatives of the label holder's loss; it "
            "cannot be used with protect_label_holder."
        )
    if weighting and not supports_weighting(loss):
        raise DpfedInputError(
            "passive_weighting needs a loss of bounded slope and curvature (logistic, "
            f"smoothed_hinge, sigmoid). Found {cfg.loss!r}."
        )
    return weighting


@dataclass
class VerticalResult:
    """Outcome of a vertical job."""

    models: dict[str, np.ndarray]
    history: list[dict[str, Any]]
    privacy: dict[str, Any]
    ledger: PrivacyLedger
    config: VerticalConfig
    rounds: list[RoundRecord]
    seconds: float
    mechanisms: list[PartyMechanism] = field(default_factory=list)
    exact: dict[str, Any] | None = None  # history figures computed from exact private values
    weighting: dict[str, float] | None = None  # the label holder's passive weight and its bounds
    score_bounds: dict[str, float | None] = field(default_factory=dict)  # prediction clips
    engine: dict[str, Any] | None = None  # where the roles ran, unless in this process

    @property
    def final(self) -> dict[str, Any]:
        return dict(self.history[-1]) if self.history else {}

    def coefficients(self) -> tuple[dict[str, np.ndarray], float]:
        """Each party's weights for its bounded rows (the label holder's without its
        intercept's), and the intercept (0.0 without one)."""
        coefs = dict(self.models)
        intercept = 0.0
        if self.mechanisms and self.models:
            holder = next(iter(self.models))
            coefs[holder], intercept = self.mechanisms[0].split_intercept(self.models[holder])
        return coefs, intercept

    def to_json(self) -> dict[str, Any]:
        cfg = asdict(self.config)
        coefs, intercept = self.coefficients()
        return with_exact_values(
            {
                "protocol": "vertical",
                "config": cfg,
                "parties": [{"name": k, "n_features": int(v.shape[0])} for k, v in coefs.items()],
                "intercept": intercept,
                "history": self.history,
                "final": self.final,
                "privacy": self.privacy,
                "weighting": self.weighting,
                "seconds": self.seconds,
            }
            | engine_block(self.engine),
            self.exact,
        )


def _party_names(n: int, names: Sequence[str] | None) -> list[str]:
    if names is None:
        return ["label"] + [f"party{m}" for m in range(1, n)]
    names = list(names)
    if len(names) != n or len(set(names)) != n:
        raise DpfedInputError(f"need {n} distinct party names. Found {names}.")
    return names


def _events_epsilon(events: Sequence[PrivacyEvent], delta: float, accountant: str) -> float:
    return gaussian_releases_epsilon(
        [e.noise_multiplier for e in events],
        delta,
        accountant,
        coordinates=sum(e.coordinates for e in events),
    )


@dataclass(frozen=True)
class SoundRounds:
    """The rounds of a sound run against the public rule's, and what each costs.

    Attributes
    ----------
    iterations : int
        The rounds the run makes.
    rule_iterations : int
        The rounds :func:`~dpfed.protocols.vertical.calibration.sound_defaults` picks for the
        same epsilon and N.
    noise_multiplier, rule_noise_multiplier : float
        The per-round noise multiplier (before the model/scores split) the target epsilon
        needs over ``iterations`` and over ``rule_iterations`` rounds.
    """

    iterations: int
    rule_iterations: int
    noise_multiplier: float
    rule_noise_multiplier: float

    @property
    def above_rule(self) -> bool:
        """Whether the run makes more rounds than the rule, so each round is noisier."""
        return self.iterations > self.rule_iterations


def sound_rounds(
    config: VerticalConfig, n_samples: int, n_features: Sequence[int] | None = None
) -> SoundRounds:
    """The rounds of a sound run with a target epsilon, the rule's, and their noise (public
    quantities only: epsilon, delta, N, the blocks' widths and the configuration; without
    ``n_features`` the exact sampler's coupling is left out of the figures).

    Raises
    ------
    DpfedInputError
        If ``config`` is not the sound mechanism with a target epsilon.
    """
    cfg = config.validated()
    if cfg.mechanism != "sound" or cfg.epsilon is None:
        raise DpfedInputError(
            "sound_rounds needs the sound mechanism with a target epsilon. Found mechanism "
            f"{cfg.mechanism!r}, epsilon {cfg.epsilon!r}."
        )
    rule = sound_defaults(cfg.epsilon, n_samples, protect_label_holder=cfg.protect_label_holder)
    at_rule = replace(config, iterations=rule.iterations, score_rounds=None).validated()
    widths = list(n_features) if n_features is not None else []
    return SoundRounds(
        iterations=cast(int, cfg.iterations),
        rule_iterations=rule.iterations,
        noise_multiplier=_calibrate_sound(
            cfg, coordinates=passive_coordinates(cfg, widths, n_samples)
        ),
        rule_noise_multiplier=_calibrate_sound(
            at_rule, coordinates=passive_coordinates(at_rule, widths, n_samples)
        ),
    )


def passive_coordinates(cfg: VerticalConfig, n_features: Sequence[int], n_samples: int) -> int:
    """The most coordinates a passive party draws from the exact grid sampler in a sound job:
    ``T`` models of its width, ``S`` score vectors of ``N`` and, with passive weighting, the
    statistics (0 without passive parties)."""
    widths = list(n_features)[1:]
    if not widths:
        return 0
    extra = len(STATISTICS) if cfg.passive_weighting else 0
    return cast(int, cfg.iterations) * max(widths) + _sound_score_rounds(cfg) * n_samples + extra


def _sound_score_rounds(cfg: VerticalConfig) -> int:
    """A passive party's rounds with a scores release: T - 1 by default.

    The last round's scores only reach the final z- and dual updates, never a model. (A
    protected label holder releases one model and T duals, calibrated in
    :func:`build_mechanisms`.)
    """
    iterations = cast(int, cfg.iterations)  # resolved by VerticalConfig.validated
    if cfg.score_rounds is not None:
        return min(int(cfg.score_rounds), iterations)
    return iterations - 1


def statistics_multiplier(noise_multiplier: float) -> float:
    """The weighting statistics' multiplier: :data:`~dpfed.protocols.vertical.weighting.
    STATISTICS_SHARE` of one round's budget (in Gaussian DP's ``mu^2``)."""
    return noise_multiplier / math.sqrt(STATISTICS_SHARE)


def _calibrate_sound(
    cfg: VerticalConfig,
    *,
    model_steps: int | None = None,
    score_steps: int | None = None,
    statistics: bool | None = None,
    coordinates: int = 0,
) -> float:
    """Per-round noise multiplier ``z`` (split into model and scores multipliers by
    :func:`split_noise_multiplier`) whose model and scores releases (and, with passive
    weighting, one statistics release) spend at most epsilon. Default counts: a passive
    party's, T models and S scores (S from :func:`_sound_score_rounds`). ``coordinates``
    of the exact grid sampler: their coupling's delta is set aside first
    (:func:`dpfed.privacy.coupling.calibration_delta`)."""
    if cfg.noise_multiplier is not None:
        return float(cfg.noise_multiplier)
    # a validated sound configuration without a noise multiplier has epsilon, delta, T, f
    epsilon = cast(float, cfg.epsilon)
    steps = cast(int, cfg.iterations) if model_steps is None else model_steps
    score_steps = _sound_score_rounds(cfg) if score_steps is None else score_steps
    statistics = cfg.passive_weighting if statistics is None else statistics
    f = cast(float, cfg.model_fraction)
    extra = STATISTICS_SHARE if statistics else 0.0
    # Gaussian releases compose exactly like one with z^-2 = sum z_i^-2 = (T f + S(1-f)) / z^2:
    # start from the exact analytic-Gaussian multiplier of one release, then let the
    # accountant have the last word (the smallest z it certifies at epsilon).
    delta = calibration_delta(cast(float, cfg.delta), coordinates, epsilon)
    z1 = analytic_gaussian_multiplier(epsilon, delta)

    def releases(z: float) -> DpEvent:
        zx, zu = split_noise_multiplier(z, f)
        multipliers = (zx,) * steps + (zu,) * score_steps
        if statistics:
            multipliers += (statistics_multiplier(z),)
        return releases_event(multipliers)

    start = z1 * math.sqrt(steps * f + score_steps * (1.0 - f) + extra)
    return calibrate(releases, epsilon, delta, cfg.accountant, start=start)


def paper_radius(cfg: VerticalConfig, n_samples: int) -> float:
    r"""The paper mechanism's radius :math:`b_1` for x, y and z: ``cfg.b1`` or
    :math:`5\sqrt N`."""
    return float(cfg.b1) if cfg.b1 is not None else 5.0 * math.sqrt(n_samples)


def build_mechanisms(
    cfg: VerticalConfig, n_features: Sequence[int], n_samples: int
) -> tuple[list[PartyMechanism], DualRelease | None, list[str]]:
    """One mechanism per party (label holder first), the dual release, and notes to print.

    ``n_features`` are the blocks' widths as given; the label holder's model has one more
    coordinate with an intercept (its column is added by its mechanism's
    :meth:`~dpfed.protocols.vertical.mechanisms.PartyMechanism.prepare_block`)."""
    n_features = [int(n_features[0]) + int(bool(cfg.fit_intercept)), *n_features[1:]]
    mechanisms, dual, notes = _party_mechanisms(cfg, n_features, n_samples)
    if cfg.fit_intercept:
        mechanisms[0].intercept_scale = cfg.intercept_scale
    return mechanisms, dual, notes


def _party_mechanisms(
    cfg: VerticalConfig, n_features: Sequence[int], n_samples: int
) -> tuple[list[PartyMechanism], DualRelease | None, list[str]]:
    """:func:`build_mechanisms` for the models' widths (the label holder's with its
    intercept)."""
    reg = get_regularizer(cfg.regularizer)
    reg_weight = n_samples * cfg.lam
    notes: list[str] = []
    if cfg.mechanism == "none":
        return [NoPrivacy() for _ in n_features], None, notes
    if cfg.mechanism == "paper":
        steps = cast(int, cfg.iterations)
        delta = cast(float, cfg.delta)  # a private mechanism's delta (VerticalConfig.validated)
        delta_step, delta_prime = delta / (2 * steps), delta / 2
        eps_step = (
            corollary1_step_epsilon(cfg.epsilon, steps, delta_prime)
            if cfg.epsilon is not None
            else None
        )
        b1 = paper_radius(cfg, n_samples)
        c1 = reg.curvature_bound if reg.curvature_bound is not None else 0.0
        mechs: list[PartyMechanism] = [
            PaperMechanism(
                d_m=d,
                n_parties=len(n_features),
                reg_weight=reg_weight,
                c1=c1,
                b1=b1,
                delta_step=delta_step,
                epsilon_step=eps_step,
                sigma=cfg.noise_sigma,
            )
            for d in n_features
        ]
        notes.append(
            "paper mechanism: no epsilon is certified (privacy.epsilon is null). "
            "privacy.paper_epsilon is the paper's Theorem 1 / Corollary 1 formula, which rests "
            "on Lemma 1; privacy.paper_epsilon_reason says why that is not a guarantee. "
            "privacy.paper_epsilon_pld accounts the same noise with Lemma 1's C as the "
            "sensitivity; C is not a proven sensitivity, so that is not a guarantee either."
        )
        return mechs, None, notes
    if cfg.bounds is None:
        slope = get_loss(cfg.loss).lipschitz
        rule = sound_defaults(
            cfg.epsilon,
            n_samples,
            rho=cast(float, cfg.rho),
            loss_slope=slope if slope is not None and math.isfinite(slope) else 1.0,
            protect_label_holder=cfg.protect_label_holder,
        )
        cfg = replace(cfg, bounds=rule.bounds)
    bounds = cast(SoundBounds, cfg.bounds)  # as given, or the public rule's
    model_fraction = cast(float, cfg.model_fraction)
    zx, zu = split_noise_multiplier(
        _calibrate_sound(cfg, coordinates=passive_coordinates(cfg, n_features, n_samples)),
        model_fraction,
    )

    def sound(model_multiplier: float, scores_multiplier: float) -> SoundMechanism:
        return SoundMechanism(
            bounds=bounds,
            reg_weight=reg_weight,
            model_multiplier=model_multiplier,
            scores_multiplier=scores_multiplier,
            score_rounds=_sound_score_rounds(cfg),
        )

    per_party: list[PartyMechanism] = [NoPrivacy()]
    dual = None
    if cfg.protect_label_holder:
        # the local model's sensitivity needs a strongly convex objective on every data set
        local_model_strong_convexity(
            ridge=reg_weight * reg.strong_convexity + bounds.prox_weight,
            weak_convexity=get_loss(cfg.loss).weak_convexity,
            n_samples=n_samples,
            row_norm=bounds.row_norm,
        )
        # one model (its local model, round 0) and T duals: calibrated on their own
        steps = cast(int, cfg.iterations)
        holder_x, holder_y = split_noise_multiplier(
            _calibrate_sound(
                cfg,
                model_steps=1,
                score_steps=steps,
                statistics=False,
                coordinates=n_features[0] + steps * n_samples,
            ),
            model_fraction,
        )
        per_party = [sound(holder_x, holder_y)]
        dual = DualRelease(bounds=bounds, noise_multiplier=holder_y)
    per_party += [sound(zx, zu) for _ in n_features[1:]]
    if not cfg.protect_label_holder:
        notes.append(
            "sound mechanism: the passive parties' rows are protected; the label holder's rows "
            "and labels are not (set protect_label_holder to protect them)."
        )
    return per_party, dual, notes


def weighting_note(weight: float) -> str:
    """What the result says of the label holder's weight of the passive parties."""
    return (
        f"passive weighting: the label holder weighted the passive parties' models by "
        f"{weight:.3g} (1: fully; 0: its local-only model), chosen from their released "
        "statistics so that the training loss stays below its local-only model's (one more "
        "release per passive party, accounted)."
    )


def prediction_bound(bounds: SoundBounds) -> float:
    """The largest passive score a weighted job predicts with: ``min(R B_x, 4 B_u)``.

    Four times the clip of the released scores: what the central node saw while training
    stays unclipped, and the weighting statistics' sensitivities shrink with the bound.
    """
    return min(bounds.row_norm * bounds.model_radius, 4.0 * bounds.score_clip)


def statistics_release(
    cfg: VerticalConfig, n_samples: int, n_features: Sequence[int]
) -> StatisticsRelease | None:
    """The weighting statistics' release of a resolved sound configuration (None without
    passive weighting)."""
    if not cfg.passive_weighting or cfg.bounds is None:
        return None
    loss = get_loss(cfg.loss)
    return StatisticsRelease(
        n_samples=n_samples,
        score_bound=prediction_bound(cfg.bounds),
        lipschitz=float(cast(float, loss.lipschitz)),  # bounded: supports_weighting
        smoothness=float(loss.smoothness),
        noise_multiplier=statistics_multiplier(
            _calibrate_sound(cfg, coordinates=passive_coordinates(cfg, n_features, n_samples))
        ),
    )


@dataclass(frozen=True)
class VerticalSetup:
    """What every party of a vertical job derives from the configuration and the data shapes:
    the resolved configuration (bounds of the public rule recorded), one mechanism per party
    (label holder first), the label holder's dual release, and notes for the output."""

    config: VerticalConfig
    mechanisms: list[PartyMechanism]
    dual_release: DualRelease | None
    notes: list[str]
    n_samples: int
    statistics_release: StatisticsRelease | None = None


def vertical_setup(cfg: VerticalConfig, n_features: Sequence[int], n_samples: int) -> VerticalSetup:
    """Resolve ``cfg`` (already validated) for parties with ``n_features`` columns each."""
    mechanisms, dual_release, notes = build_mechanisms(cfg, n_features, n_samples)
    applied = [m.bounds for m in mechanisms if isinstance(m, SoundMechanism)]
    if cfg.bounds is None and applied:
        cfg = replace(cfg, bounds=applied[0])  # record the bounds the public rule chose
    return VerticalSetup(
        cfg,
        mechanisms,
        dual_release,
        notes,
        n_samples,
        statistics_release(cfg, n_samples, n_features),
    )


def party_rng(seed: int | None, index: int, n_parties: int) -> np.random.Generator:
    """Party ``index``'s noise generator: stream ``index`` of ``SeedSequence(seed).spawn``
    (fresh OS entropy when ``seed`` is None), the same in every runtime."""
    return simulation_generator(seed, index, n_parties)


def make_vertical_role(
    setup: VerticalSetup,
    index: int,
    names: Sequence[str],
    block: Matrix,
    *,
    rng: np.random.Generator,
    labels: np.ndarray | None = None,
    observer: Callable[[RoundRecord], None] | None = None,
) -> LabelHolder | PassiveParty:
    """Party ``index``'s role (0: the label holder, which needs ``labels``)."""
    cfg = setup.config
    common = dict(
        regularizer=get_regularizer(cfg.regularizer),
        reg_weight=setup.n_samples * cfg.lam,
        inner_iterations=cfg.inner_iterations,
        mechanism=setup.mechanisms[index],
        rng=rng,
    )
    if index > 0:
        return PassiveParty(
            names[index],
            block,
            label_holder=names[0],
            statistics_release=setup.statistics_release,
            **common,
        )
    # the resolved configuration (VerticalConfig.validated) and the label holder's labels
    return LabelHolder(
        names[0],
        block,
        cast(np.ndarray, labels),
        parties=list(names[1:]),
        loss=get_loss(cfg.loss),
        rho=cast(float, cfg.rho),
        max_rounds=cast(int, cfg.iterations),
        stop_tol=cfg.tol,
        adaptive=ResidualBalancing() if cfg.adaptive_rho else None,
        central_radius=(
            cast(PaperMechanism, setup.mechanisms[0]).b1 if cfg.mechanism == "paper" else None
        ),
        dual_release=setup.dual_release,
        warm_start_rounds=cast(int, cfg.warm_start_rounds),
        relaxation=RELAXATION if cfg.acceleration in ("relaxed", "anderson") else 1.0,
        anderson_memory=ANDERSON_MEMORY if cfg.acceleration == "anderson" else 0,
        statistics_release=setup.statistics_release,
        observer=observer,
        **common,
    )


def planned_multipliers(setup: VerticalSetup, index: int, n_features: int) -> list[float | Release]:
    r"""Every release party ``index`` (``n_features`` wide, plus its intercept's weight if its
    mechanism adds the column) will make if all rounds run: the
    sound mechanism's as :class:`~dpfed.privacy.accounting.Release`\ s with the coordinates
    they draw from the exact grid sampler, the paper mechanism's as noise multipliers.

    The networked runtime reserves them in the party's budget ledger before the first round;
    a release that does not match the plan is refused by the ledger before it leaves.
    """
    cfg, mech = setup.config, setup.mechanisms[index]
    steps, n = cast(int, cfg.iterations), setup.n_samples  # resolved by validated()
    width = int(n_features) + int(mech.intercept_scale is not None)  # the intercept's weight
    if isinstance(mech, SoundMechanism):
        model, scores = mech.releases(cast(float, cfg.rho))
        plan = cast(
            list[float | Release],
            [Release("gaussian", model.noise_multiplier, width)] * (steps if index > 0 else 1),
        )
        if index > 0:
            rounds = steps if mech.score_rounds is None else min(steps, mech.score_rounds)
            plan += [Release("gaussian", scores.noise_multiplier, n)] * rounds
            if setup.statistics_release is not None:
                plan += [
                    Release(
                        "gaussian",
                        setup.statistics_release.release.noise_multiplier,
                        len(STATISTICS),
                    )
                ]
        elif setup.dual_release is not None:
            plan += [Release("gaussian", setup.dual_release.release.noise_multiplier, n)] * steps
        return plan
    if isinstance(mech, PaperMechanism):
        bound, sigma, _ = mech.noise(cast(float, cfg.rho))
        return cast(list[float | Release], [sigma / bound] * steps)
    return []


def _validate_data(
    blocks: Sequence[Matrix], labels: np.ndarray | None, names: Sequence[str], *, what: str
) -> int:
    if len(blocks) < 1:
        raise DpfedInputError(f"{what} needs at least one block. Found none.")
    for name, block in zip(names, blocks, strict=True):
        check_finite_matrix(f"{what} block of {name}", block)
    n = check_same_rows(names, [b.shape[0] for b in blocks])
    if labels is not None and np.asarray(labels).reshape(-1).shape[0] != n:
        raise DpfedInputError(
            f"{what} labels must have one entry per row ({n}). "
            f"Found {np.asarray(labels).reshape(-1).shape[0]}."
        )
    return n


@vector_work
def train_vertical(
    blocks: Sequence[Matrix],
    labels: np.ndarray,
    config: VerticalConfig | None = None,
    *,
    names: Sequence[str] | None = None,
    test_blocks: Sequence[Matrix] | None = None,
    test_labels: np.ndarray | None = None,
    progress: bool = False,
    rngs: Sequence[np.random.Generator] | None = None,
    engine: str | Engine | None = None,
) -> VerticalResult:
    """Train a vertically partitioned model by (DP) ADMM sharing.

    Parameters
    ----------
    blocks : sequence of arrays or sparse matrices, shapes ``(N, d_m)``
        Column blocks, the label holder's first.
    labels : ndarray, shape (N,)
        In {-1, 1} or {0, 1} for the binary losses.
    config : VerticalConfig
    names : sequence of str, optional
        Party names (default ``label, party1, ...``).
    test_blocks, test_labels : optional
        Held-out rows, evaluated every round by the prediction protocol.
    progress : bool
        Show a progress bar when standard error is a terminal.
    rngs : sequence of numpy.random.Generator, optional
        One noise generator per party (label holder first), e.g. the generators of a networked
        job's party secrets (:func:`dpfed.privacy.noise_source.secret_generator`). Default:
        the streams of ``config.seed`` (:func:`party_rng`).
    engine : str or Engine, optional
        Where the roles run: ``"inprocess"`` (default) or ``"ray"``, or an engine instance
        (:func:`dpfed.engines.get_engine`); every engine gives the same run bit for bit.

    Notes
    -----
    The history's ``train_objective`` (and, with a protected label holder, its residuals) is
    computed from exact private values, which this one process holds; the result says so in
    ``exact_values``.
    """
    cfg = (config or VerticalConfig()).validated()
    names = _party_names(len(blocks), names)
    n = _validate_data(blocks, labels, names, what="training")
    y, y_test = _checked_labels(cfg, blocks, labels, names, test_blocks, test_labels)
    setup = vertical_setup(cfg, [b.shape[1] for b in blocks], n)
    rngs = _party_rngs(setup.config, rngs, len(blocks))
    run = _run_roles(
        setup, names, blocks, rngs, y, test_blocks, y_test, progress=progress, engine=engine
    )
    return _vertical_result(setup, names, run)


def _checked_labels(
    cfg: VerticalConfig,
    blocks: Sequence[Matrix],
    labels: np.ndarray,
    names: Sequence[str],
    test_blocks: Sequence[Matrix] | None,
    test_labels: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The training labels and the test labels (None without test data), checked with the
    test blocks against the training blocks."""
    loss = get_loss(cfg.loss)
    y = check_binary_labels("labels", labels) if loss.binary else np.asarray(labels, float)
    if not np.all(np.isfinite(y)):
        raise DpfedInputError("labels must be finite.")
    y_test = None
    if test_blocks is not None:
        if len(test_blocks) != len(blocks):
            raise DpfedInputError(
                f"test data must have {len(blocks)} blocks like training. Found {len(test_blocks)}."
            )
        _validate_data(test_blocks, test_labels, names, what="test")
        for name, b, tb in zip(names, blocks, test_blocks, strict=True):
            if tb.shape[1] != b.shape[1]:
                raise DpfedInputError(
                    f"test block of {name} must have {b.shape[1]} columns. Found {tb.shape[1]}."
                )
        y_test = check_binary_labels("test labels", cast(np.ndarray, test_labels))
    return y, y_test


def _party_rngs(
    cfg: VerticalConfig, rngs: Sequence[np.random.Generator] | None, n_parties: int
) -> Sequence[np.random.Generator]:
    """``rngs`` if it holds one generator per party, else the streams of ``cfg.seed``."""
    if rngs is None:
        rngs = [party_rng(cfg.seed, m, n_parties) for m in range(n_parties)]
    elif len(rngs) != n_parties:
        raise DpfedInputError(
            f"rngs must hold one generator per party ({n_parties}). Found {len(rngs)}."
        )
    return rngs


@dataclass
class _VerticalRun:
    """The roles of an in-process run in their final state, and what the run recorded."""

    holder: LabelHolder
    passive: list[PassiveParty]
    history: list[dict[str, Any]]
    seconds: float  # training time, evaluation excluded
    report: EngineReport


def _run_roles(
    setup: VerticalSetup,
    names: Sequence[str],
    blocks: Sequence[Matrix],
    rngs: Sequence[np.random.Generator],
    y: np.ndarray,
    test_blocks: Sequence[Matrix] | None,
    y_test: np.ndarray | None,
    *,
    progress: bool,
    engine: str | Engine | None,
) -> _VerticalRun:
    """Build every party's role and run them on ``engine``, evaluating every round."""
    cfg = setup.config
    passive = [
        cast(PassiveParty, make_vertical_role(setup, m, names, blocks[m], rng=rngs[m]))
        for m in range(1, len(blocks))
    ]
    history: list[dict[str, Any]] = []
    clock = {"train": 0.0, "since": time.perf_counter()}
    bar = progress_bar(cast(int, cfg.iterations), progress)

    def observe(record: RoundRecord) -> None:
        clock["train"] += time.perf_counter() - clock["since"]
        entry = _evaluate(record, holder, passive, y, test_blocks, y_test, cfg)
        entry["seconds"] = clock["train"]
        history.append(entry)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(
                {
                    k: f"{history[-1][k]:.4g}"
                    for k in ("train_objective", "epsilon")
                    if history[-1].get(k) is not None
                }
            )
        clock["since"] = time.perf_counter()

    holder = cast(
        LabelHolder,
        make_vertical_role(setup, 0, names, blocks[0], rng=rngs[0], labels=y, observer=observe),
    )
    clock["since"] = time.perf_counter()
    report = get_engine(engine).run(
        {p.name: p for p in cast(list[LabelHolder | PassiveParty], [holder, *passive])},
        holder.start(),
    )
    if bar is not None:
        bar.close()
    return _VerticalRun(holder, passive, history, clock["train"], report)


def _vertical_result(
    setup: VerticalSetup, names: Sequence[str], run: _VerticalRun
) -> VerticalResult:
    """The result of a finished run: models, ledger, privacy summary and notes."""
    cfg, holder, passive = setup.config, run.holder, run.passive
    ledger = PrivacyLedger()
    for event in _all_events(holder, passive):
        ledger.record(event)
    models = {holder.name: holder.model.copy()} | {p.name: p.model.copy() for p in passive}
    private = cfg.mechanism != "none"
    notes = setup.notes + (in_process_seed_note(cfg.seed) if private else [])
    if holder.weighting is not None:
        notes.append(weighting_note(holder.weighting.weight))
    premises = (
        {
            r.name: cast(PaperMechanism, r.mechanism).eigenvalue_premise(r.solver.spectrum)
            for r in [holder, *passive]
        }
        if cfg.mechanism == "paper"
        else None
    )
    privacy = privacy_summary(cfg, ledger, names, notes, premises=premises)
    protected = setup.dual_release is not None
    exact = exact_values(
        ["train_objective", *(("primal_residual", "dual_residual") if protected else ())]
        if private
        else [],
        left_parties=False,
    )
    return VerticalResult(
        models,
        run.history,
        privacy,
        ledger,
        cfg,
        holder.history,
        run.seconds,
        setup.mechanisms,
        exact,
        None if holder.weighting is None else holder.weighting.as_dict(),
        {r.name: r.score_bound for r in [holder, *passive]},
        engine_summary(run.report),
    )


def _all_events(holder: LabelHolder, passive: Sequence[PassiveParty]) -> list[PrivacyEvent]:
    events = list(holder.events)
    for p in passive:
        events.extend(p.events)
    return sorted(events, key=lambda e: (e.round, e.party, e.label))


def party_epsilon(events: Sequence[PrivacyEvent], cfg: VerticalConfig) -> float | None:
    """Certified epsilon one party has spent so far, as the history reports it.

    Sound mechanism: the configured accountant over the party's Gaussian releases. Paper
    mechanism: None once it has released anything (its only figure, Theorem 1 / Corollary 1,
    rests on Lemma 1, whose premises do not hold; see :func:`privacy_summary`). No
    mechanism: 0.
    """
    if cfg.mechanism == "sound":
        return _events_epsilon(events, cast(float, cfg.delta), cfg.accountant)
    if cfg.mechanism == "paper" and events:
        return None
    return 0.0


def _evaluate(
    record: RoundRecord,
    holder: LabelHolder,
    passive: Sequence[PassiveParty],
    y: np.ndarray,
    test_blocks: Sequence[Matrix] | None,
    y_test: np.ndarray | None,
    cfg: VerticalConfig,
) -> dict[str, Any]:
    roles = [holder, *passive]
    return round_metrics(
        record,
        loss=holder.loss,
        labels=y,
        lam=cfg.lam,
        train_scores=[r.scores(r.block) for r in roles],
        regularization=[r.regularization() for r in roles],
        test_scores=(
            None
            if test_blocks is None
            else [r.partial_scores(b) for r, b in zip(roles, test_blocks, strict=True)]
        ),
        test_labels=y_test,
        epsilons=[party_epsilon(r.events, cfg) for r in roles],
    )


def privacy_summary(
    cfg: VerticalConfig,
    ledger: PrivacyLedger,
    names: Sequence[str],
    notes: list[str],
    *,
    premises: Mapping[str, EigenvaluePremise] | None = None,
) -> dict[str, Any]:
    r"""The result's ``privacy`` entry.

    ``epsilon`` is the certified total (max over parties; 0 without a mechanism). The paper
    mechanism certifies none: ``epsilon`` is None, ``paper_epsilon`` is the paper's
    Corollary 1 total :math:`\varepsilon' = \sqrt{2T\ln(1/\delta')}\,\varepsilon +
    T\varepsilon(e^\varepsilon - 1)` at :math:`(\varepsilon', T\delta_s + \delta')`,
    ``paper_epsilon_pld`` the PLD figure of the same noise with Lemma 1's :math:`C` as the
    sensitivity, and ``paper_epsilon_reason`` lists why neither is a guarantee (the unbounded
    noise, and per party the eigenvalue premise of ``premises``: measured in-process, only
    what the shapes prove in the networked runtime).
    """
    summary: dict[str, Any] = {
        "mechanism": cfg.mechanism,
        "epsilon": 0.0,
        "delta": cfg.delta,
        "accountant": None,
        "per_party": {},
        "notes": notes,
    }
    if cfg.mechanism == "none":
        summary["notes"] = ["no privacy mechanism: the messages are exact"]
        return summary
    delta = cast(float, cfg.delta)  # a private mechanism's (VerticalConfig.validated)
    per_party: dict[str, dict[str, Any]] = {}
    for name in names:
        events = ledger.events(name)
        if not events:
            per_party[name] = {"releases": 0, "epsilon": 0.0}
            continue
        if cfg.mechanism == "paper":
            eps, delta_total = ledger.paper_epsilon(name, delta / 2)
            premise = (premises or {}).get(name)
            entry: dict[str, Any] = {
                "releases": len(events),
                "epsilon": None,
                "paper_epsilon": eps,
                "paper_delta": delta_total,
                "paper_epsilon_pld": _events_epsilon(events, delta, "pld"),
                "epsilon_step": events[-1].epsilon,
                "delta_step": events[-1].delta,
                "sigma": events[-1].sigma,
                "eigenvalue_premise": None if premise is None else premise.holds,
            }
            if cast(float, events[-1].epsilon) > 1:  # the paper mechanism's events carry it
                notes.append(
                    f"{name}: per-iteration epsilon {events[-1].epsilon:.4g} > 1 lies outside "
                    "Theorem 1's hypothesis (epsilon in (0, 1]); the figure is the formula's value."
                )
        else:
            entry = {
                "releases": len(events),
                "epsilon_pld": _events_epsilon(events, delta, "pld"),
                "epsilon_rdp": _events_epsilon(events, delta, "rdp"),
            }
            entry["epsilon"] = entry[f"epsilon_{cfg.accountant}"]
            entry["noise_multipliers"] = sorted({round(e.noise_multiplier, 12) for e in events})
            entry["grid_coordinates"] = sum(e.coordinates for e in events)
        per_party[name] = entry
    summary["per_party"] = per_party
    if cfg.mechanism != "paper":
        summary["epsilon"] = max(p["epsilon"] for p in per_party.values())
        summary["accountant"] = cfg.accountant
        summary["sampler"] = SAMPLER
        return summary
    premises = dict(premises or {})
    n_samples = next((p.n_samples for p in premises.values()), None)
    b1 = paper_radius(cfg, n_samples) if n_samples is not None else cfg.b1
    summary["epsilon"] = None
    summary["paper_epsilon"] = max(p.get("paper_epsilon", 0.0) for p in per_party.values())
    summary["paper_delta"] = max(p.get("paper_delta", 0.0) for p in per_party.values())
    summary["paper_accountant"] = "corollary1"
    summary["paper_epsilon_pld"] = max(p.get("paper_epsilon_pld", 0.0) for p in per_party.values())
    summary["paper_epsilon_reason"] = paper_epsilon_reasons(b1, premises)
    return summary
