"""Parameters defined once: job-file tables, command-line options and estimator names agree."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

import pytest

from dpfed._validation import DpfedInputError
from dpfed.parameters import (
    Interval,
    add_config_arguments,
    check_params,
    config_from_table,
    config_kwargs,
    job_parameters,
    param,
    parameter_names,
    parameters,
    secret_parameters,
)
from dpfed.protocols.consensus.driver import ConsensusConfig
from dpfed.protocols.consensus.host import CONSENSUS_PARAMS
from dpfed.protocols.decentralized.driver import DecentralizedConfig
from dpfed.protocols.decentralized.host import DECENTRALIZED_PARAMS
from dpfed.protocols.vertical.calibration import SoundBounds
from dpfed.protocols.vertical.driver import VerticalConfig
from dpfed.protocols.vertical.host import VERTICAL_PARAMS, vertical_config
from dpfed.runtime.registry import get_protocol

CONFIGS = [VerticalConfig, ConsensusConfig, DecentralizedConfig]


@pytest.mark.parametrize("config", CONFIGS)
def test_every_field_is_declared_once_with_help(config):
    params = parameters(config)
    assert [p.name for p in params] == parameter_names(config)
    assert all(p.info.help for p in params)


@pytest.mark.parametrize("config", CONFIGS)
def test_one_vocabulary_the_noise_seed_is_the_only_secret(config):
    assert secret_parameters(config) == ["seed"]


@dataclass(frozen=True)
class Ranged:
    count: int = param(1, help="at least one", interval=(1, None), closed="left")
    share: float = param(0.5, help="in (0, 1)", interval=(0, 1))
    weight: float = param(0.0, help="at least 0", interval=(0, None), closed="left")
    ratio: float | None = param(help="in (0, 2]", interval=(0, 2), closed="right")
    kind: str = param("a", help="a or b", choices=("a", "b"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": 0}, r"count must be an integer >= 1\. Found 0"),
        ({"count": 1.5}, r"count must be an integer\. Found 1\.5"),
        ({"share": 1.0}, r"share must be in the open interval \(0, 1\)\. Found 1\.0"),
        ({"weight": -1e-9}, r"weight must be a finite number >= 0\. Found -1e-09"),
        ({"ratio": 0.0}, r"ratio must be a finite number in \(0, 2\]\. Found 0\.0"),
        ({"ratio": float("nan")}, r"ratio must be a finite number in \(0, 2\]"),
        ({"kind": "c"}, r"kind must be one of \('a', 'b'\)\. Found 'c'"),
    ],
)
def test_a_value_outside_its_declaration_is_refused_by_name(change, message):
    check_params(Ranged(ratio=2.0))  # the closed end belongs to the interval; None passes
    check_params(Ranged())
    with pytest.raises(DpfedInputError, match=message):
        check_params(replace(Ranged(), **change))


def test_an_interval_names_its_ends():
    with pytest.raises(ValueError, match="closed must be one of"):
        Interval(0, 1, "open")


@pytest.mark.parametrize(
    ("config", "field", "value", "message"),
    [
        (VerticalConfig, "lam", -1.0, r"lam must be a finite number >= 0"),
        (VerticalConfig, "accountant", "moments", r"accountant must be one of \('pld', 'rdp'\)"),
        (VerticalConfig, "inner_iterations", 0, r"inner_iterations must be an integer >= 1"),
        (VerticalConfig, "intercept_scale", 1.0, r"intercept_scale must be in the open int"),
        (ConsensusConfig, "average_last", 0, r"average_last must be an integer >= 1"),
        (ConsensusConfig, "accountant", "basic", r"one of \('pld', 'rdp', 'moments'\)"),
        (DecentralizedConfig, "eta", 0.0, r"eta must be a finite number > 0"),
        (DecentralizedConfig, "delta", 1.0, r"delta must be in the open interval"),
    ],
)
def test_every_config_checks_its_fields_against_their_declarations(config, field, value, message):
    with pytest.raises(DpfedInputError, match=message):
        replace(config(), **{field: value}).validated()


def test_the_registered_protocols_take_their_job_parameters_from_the_configs():
    # vertical: the configuration's fields, the job's rounds_above_rule and secure (which
    # selects the secure mode, a protocol with parameters of its own)
    assert get_protocol("vertical").params == VERTICAL_PARAMS
    assert set(VERTICAL_PARAMS) - {"rounds_above_rule", "secure"} == set(
        job_parameters(VerticalConfig)
    )
    assert VERTICAL_PARAMS["rounds_above_rule"].kind is bool
    assert VERTICAL_PARAMS["secure"].kind is bool
    assert get_protocol("vertical_secure").params["secure"].kind is bool
    assert get_protocol("consensus").params == CONSENSUS_PARAMS == job_parameters(ConsensusConfig)
    graph = {"graph", "graph_seed", "p", "radius"}
    assert set(DECENTRALIZED_PARAMS) - graph == set(parameter_names(DecentralizedConfig))
    assert VERTICAL_PARAMS["bounds"].toml_types == (dict,)  # the job file has every field
    assert VERTICAL_PARAMS["tol"].toml_types == (list,)
    assert VERTICAL_PARAMS["lam"].toml_types == (int, float)


def test_a_tuple_parameter_reads_its_length_from_its_type():
    tol = VERTICAL_PARAMS["tol"]  # tuple[float, float], metavar ABS REL
    assert tol.length == 2
    assert tol.read([0, 1], "[params].tol") == [0.0, 1.0]
    with pytest.raises(DpfedInputError, match=r"\[params\]\.tol must be \[abs, rel\], 2 finite"):
        tol.read([1e-3], "[params].tol")
    alphas = DECENTRALIZED_PARAMS["node_alphas"]  # tuple[float, ...]
    assert alphas.length is None
    assert alphas.read([1, 0.5, 2], "x") == [1.0, 0.5, 2.0]
    with pytest.raises(DpfedInputError, match="x must be a list of finite numbers"):
        alphas.read([1, True], "x")


def test_a_job_table_builds_the_config_with_nested_bounds_and_tuples():
    cfg = vertical_config(
        {
            "mechanism": "sound",
            "epsilon": 1,
            "delta": 1e-5,
            "tol": [1e-4, 1e-3],
            "bounds": {"row_norm": 1, "score_clip": 0.5},
        }
    )
    assert cfg.bounds == SoundBounds(row_norm=1.0, score_clip=0.5)
    assert cfg.tol == (1e-4, 1e-3)
    with pytest.raises(DpfedInputError, match=r"\[params\]\.bounds has unknown keys \['clip'\]"):
        config_from_table(VerticalConfig, {"bounds": {"clip": 1.0}})
    with pytest.raises(DpfedInputError, match=r"\[params\]\.bounds\.row_norm must be a finite"):
        config_from_table(VerticalConfig, {"bounds": {"row_norm": "one"}})
    with pytest.raises(DpfedInputError, match=r"unknown keys \['noise_sigmaa'\]"):
        config_from_table(VerticalConfig, {"noise_sigmaa": 1.0})
    decentralized = config_from_table(
        DecentralizedConfig, {"node_alphas": [1, 0.5], "graph": "ring"}, exclude=("graph",)
    )
    assert decentralized.node_alphas == (1.0, 0.5)


def test_command_line_options_are_generated_and_read_back():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, ConsensusConfig, exclude=("seed",))
    args = parser.parse_args(["--mechanism", "gaussian", "--epsilon", "1", "--lam", "0.01"])
    assert config_kwargs(ConsensusConfig, args) == {
        "mechanism": "gaussian",
        "epsilon": 1.0,
        "lam": 0.01,
    }
    with pytest.raises(SystemExit):
        parser.parse_args(["--mechanism", "laplace"])  # choices come from the definition
    vertical = argparse.ArgumentParser()
    add_config_arguments(vertical, VerticalConfig)
    args = vertical.parse_args(
        ["--no-adaptive-rho", "--tol", "1e-4", "1e-3", "--protect-label-holder"]
    )
    assert config_kwargs(VerticalConfig, args) == {
        "adaptive_rho": False,
        "tol": (1e-4, 1e-3),
        "protect_label_holder": True,
    }


def test_a_field_without_its_definition_is_refused():
    @dataclass(frozen=True)
    class Loose:
        lam: float = param(1.0, help="weight")
        rho: float = 1.0

    with pytest.raises(TypeError, match=r"Loose\.rho must be declared with param\(\)"):
        parameters(Loose)


@pytest.mark.parametrize(
    ("estimator", "config", "fixed"),
    [
        ("VerticalLogisticRegression", VerticalConfig, {}),
        ("ConsensusLogisticRegression", ConsensusConfig, {"loss": "logistic"}),
        ("DecentralizedLogisticRegression", DecentralizedConfig, {"loss": "logistic"}),
    ],
)
def test_every_estimator_exposes_every_field_of_its_configuration(estimator, config, fixed):
    """An estimator takes each configuration field by its own name (``seed`` as scikit-learn's
    ``random_state``; a logistic regression fixes its loss), and passes every one on."""
    import dpfed.estimators as estimators
    from dpfed.estimators._base import config_of

    cls = getattr(estimators, estimator)
    wanted = set(parameter_names(config)) - {"seed", *fixed}
    assert wanted <= set(cls().get_params())
    # a value for every field, each different from its default, reaches the configuration
    changed = {"random_state": 7, "iterations": 3, "fit_intercept": False, "intercept_scale": 0.3}
    made = config_of(cls(**changed), config, **fixed)
    assert made.seed == 7 and made.iterations == 3 and made.intercept_scale == 0.3
    assert not made.fit_intercept
    assert {name: getattr(made, name) for name in wanted} == {
        name: getattr(cls(**changed), name) for name in wanted
    }
