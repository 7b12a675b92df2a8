"""The ``train`` commands' options come from the protocols' configurations."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import pytest

from dpfed._validation import DpfedInputError
from dpfed.cli import build_parser, main
from dpfed.cli.vertical import rounds_line
from dpfed.parameters import config_kwargs, option_name, parameters
from dpfed.protocols.consensus.driver import CONSENSUS_TRAINING, ConsensusConfig
from dpfed.protocols.decentralized.driver import DecentralizedConfig
from dpfed.protocols.vertical.calibration import SoundBounds, sound_defaults
from dpfed.protocols.vertical.driver import VerticalConfig, sound_rounds

CONFIGS = {
    "vertical": VerticalConfig,
    "consensus": ConsensusConfig,
    "decentralized": DecentralizedConfig,
}


def _train_parser(protocol: str) -> argparse.ArgumentParser:
    parser = build_parser()
    train = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = train.choices["train"]
    protocols = next(a for a in command._actions if isinstance(a, argparse._SubParsersAction))
    return protocols.choices[protocol]


@pytest.mark.parametrize("protocol", sorted(CONFIGS))
def test_every_config_field_has_an_option(protocol):
    options = {s for a in _train_parser(protocol)._actions for s in a.option_strings}
    missing = []
    for p in parameters(CONFIGS[protocol]):
        if dataclasses.is_dataclass(p.kind):
            names = [option_name(f"{p.name}_{f.name}") for f in dataclasses.fields(p.kind)]
        else:
            names = [option_name(p.name)]
        missing += [n for n in names if n not in options]
    assert missing == []


def _parse(protocol: str, *extra: str) -> argparse.Namespace:
    required = {
        "vertical": ["--data", "x", "--split", "1,1"],
        "consensus": ["--data", "x", "--clients", "2"],
        "decentralized": ["--data", "x", "--nodes", "3"],
    }[protocol]
    return _train_parser(protocol).parse_args(
        [*required, "--iterations", "5", "--out", "o.json", *extra]
    )


def test_options_become_config_fields_of_their_type():
    args = _parse(
        "vertical",
        "--mechanism",
        "sound",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--tol",
        "1e-4",
        "1e-3",
        "--no-adaptive-rho",
        "--model-fraction",
        "0.7",
        "--score-rounds",
        "3",
        "--bounds-row-norm",
        "2",
        "--seed",
        "4",
    )
    got = config_kwargs(VerticalConfig, args)
    assert got == {
        "mechanism": "sound",
        "epsilon": 2.0,
        "delta": 1e-5,
        "iterations": 5,
        "tol": (1e-4, 1e-3),
        "adaptive_rho": False,
        "model_fraction": 0.7,
        "score_rounds": 3,
        "bounds": SoundBounds(row_norm=2.0),
        "seed": 4,
    }
    VerticalConfig(**got).validated()
    alphas = config_kwargs(DecentralizedConfig, _parse("decentralized", "--node-alphas", "1,0.5,2"))
    assert alphas["node_alphas"] == (1.0, 0.5, 2.0)


def test_options_left_out_keep_the_config_or_command_defaults():
    assert config_kwargs(VerticalConfig, _parse("vertical")) == {"iterations": 5}
    assert config_kwargs(ConsensusConfig, _parse("consensus")) == {
        "iterations": 5,
        **CONSENSUS_TRAINING.defaults,
    }


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--mechanism", "loud"], "invalid choice: 'loud'"),
        (["--epsilon", "one"], "expected a number, got 'one'"),
        (["--tol", "1e-4"], "expected 2 arguments"),
        (["--bounds-row-norm", "x"], "expected a number, got 'x'"),
    ],
)
def test_bad_options_are_refused_by_name(capsys, extra, match):
    with pytest.raises(SystemExit) as stop:
        _parse("vertical", *extra)
    assert stop.value.code == 2 and match in capsys.readouterr().err


def test_help_shows_the_defaults_and_the_command_rules(capsys):
    with pytest.raises(SystemExit):
        main(["train", "decentralized", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "ADMM rounds (default 100)" in shown
    assert "default: the paper's per perturbation" in shown


def _without_grpc(monkeypatch) -> None:
    """As if the net extra were not installed (grpc cannot be imported)."""
    for name in [
        m
        for m in sys.modules
        if m.startswith(("dpfed.cli.net", "dpfed.runtime.party", "dpfed.runtime.leader"))
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "grpc", None)


def test_a_run_configures_its_own_command_only(monkeypatch):
    # without grpc (the 'net' extra) every other command still runs ...
    _without_grpc(monkeypatch)
    assert (
        main(["privacy", "epsilon", "--noise-multiplier", "2", "--steps", "3", "--delta", "1e-5"])
        == 0
    )
    assert "dpfed.cli.net" not in sys.modules


def test_a_missing_extra_is_named(monkeypatch, capsys):
    _without_grpc(monkeypatch)
    assert main(["run", "--config", "job.toml", "--out", "r.json"]) == 2
    assert "dpfed run needs the 'net' extra (grpc is missing)" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", sorted(CONFIGS))
def test_rounds_are_optional_for_every_train_command(protocol):
    required = {
        "vertical": ["--data", "x", "--split", "1,1"],
        "consensus": ["--data", "x", "--clients", "2"],
        "decentralized": ["--data", "x", "--nodes", "3"],
    }[protocol]
    args = _train_parser(protocol).parse_args([*required, "--out", "o.json"])
    assert args.iterations is None  # the configuration's default or public rule decides


SOUND_EPS1 = VerticalConfig(mechanism="sound", epsilon=1.0, delta=1e-5)


def test_the_output_says_what_the_rule_chose():
    line = rounds_line(SOUND_EPS1, False, 30_000, False)
    rule = sound_defaults(1.0, 30_000).iterations
    assert line.startswith(f"rounds: {rule}, picked by the sound mechanism's public rule")
    assert rounds_line(VerticalConfig(), False, 100, False) == "rounds: 20 (default)"
    assert rounds_line(VerticalConfig(iterations=7), True, 100, False) == "rounds: 7"


def test_rounds_above_the_rule_are_refused_with_their_predicted_cost():
    above = dataclasses.replace(SOUND_EPS1, iterations=20)
    plan = sound_rounds(above, 30_000)
    assert plan.above_rule and plan.noise_multiplier > 2 * plan.rule_noise_multiplier
    with pytest.raises(DpfedInputError) as refused:
        rounds_line(above, True, 30_000, False)
    message = str(refused.value)
    assert f"{plan.noise_multiplier:.3g} at 20 rounds" in message
    assert f"{plan.rule_noise_multiplier:.3g} at the rule's {plan.rule_iterations}" in message
    assert "--rounds-above-rule" in message
    assert "given;" in rounds_line(above, True, 30_000, True)  # the user insists: run, say so


def test_secure_vertical_trains_under_encryption_and_writes_its_costs(tmp_path, capsys):
    pytest.importorskip("tenseal")
    import json

    out = tmp_path / "secure.json"
    assert (
        main(
            [
                "train",
                "vertical",
                "--data",
                "breast_cancer",
                "--split",
                "15,15",
                "--secure",
                "--epsilon",
                "2",
                "--delta",
                "1e-5",
                "--protect-label-holder",
                "--iterations",
                "3",
                "--seed",
                "0",
                "--baselines",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "secure mode: 3 rounds, protecting every party and the labels" in shown
    result = json.loads(out.read_text())
    assert result["protocol"] == "vertical-secure"
    assert result["privacy"]["epsilon"] <= 2.0 + 1e-9
    assert result["privacy"]["rounds"] == 3
    assert result["costs"]["bytes_per_round"] > 0
    assert 0.0 <= result["final"]["test_accuracy"] <= 1.0  # 398 rows: little to learn at eps 2
    assert set(result["baselines"]) == {"label_holder_alone", "central_non_private"}
    assert len(result["model"]["blocks"]) == 2 and "intercept" in result["model"]
    assert "nothing bounds this model by the label holder's own or by the base rate" in shown
    assert result["model"]["guarantee"].startswith("every block comes from noisy releases")


def test_a_label_holder_keeping_its_model_weighs_the_passive_scores(tmp_path, capsys):
    pytest.importorskip("tenseal")
    import json

    out = tmp_path / "parties.json"
    assert (
        main(
            [
                "train",
                "vertical",
                "--data",
                "breast_cancer",
                "--split",
                "15,15",
                "--secure",
                "--epsilon",
                "8",
                "--delta",
                "1e-5",
                "--protect-label-holder",
                "--label-holder-keeps-model",
                "--iterations",
                "2",
                "--seed",
                "0",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "the label holder keeps its own model" in shown
    assert "the label holder's own model plus" in shown and "passive party's scores" in shown
    result = json.loads(out.read_text())
    assert result["privacy"]["protect"] == "parties"
    assert result["privacy"]["releases"] == 4  # Gram, 2 rounds, the weighting statistics
    assert 0.0 <= result["model"]["passive_weight"] <= 1.0
    assert result["model"]["passive_score_clip"] == 2.0
    assert result["model"]["guarantee"].startswith("not worse than the label holder's own")
    assert "nothing bounds this model" not in shown


@pytest.mark.networked
def test_secure_vertical_runs_its_parties_on_ray(tmp_path, capsys, local_ray):
    pytest.importorskip("tenseal")
    import json

    import numpy as np

    from dpfed.data import load_dataset, vertical_split
    from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical

    out = tmp_path / "ray.json"
    assert (
        main(
            [
                "train",
                "vertical",
                "--data",
                "breast_cancer",
                "--split",
                "15,15",
                "--secure",
                "--epsilon",
                "8",
                "--delta",
                "1e-5",
                "--iterations",
                "1",
                "--seed",
                "0",
                "--engine",
                "ray",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "round 1/1 done" in shown
    result = json.loads(out.read_text())
    assert result["engine"]["engine"] == "ray" and len(result["engine"]["workers"]) >= 1
    assert result["privacy"]["protect"] == "passive" and result["costs"]["setup_bytes"] > 0
    # the parties' roles on Ray actors: the simulation's job with the same seed, up to CKKS
    data = load_dataset("breast_cancer")
    blocks = vertical_split(data.X_train, [15, 15])
    setup = SecureSetup(blocks[0].shape[0], (15, 15), 8.0, 1e-5, protect="passive", rounds=1)
    plain = train_secure_vertical(blocks, data.y_train, setup, seed=0, backend="plain")
    for got, want in zip(result["model"]["blocks"], plain.blocks, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-3)
    assert result["model"]["passive_weight"] == pytest.approx(plain.weighting.beta, abs=2e-3)
    assert result["privacy"]["epsilon"] == plain.privacy()["epsilon"]


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--loss", "sigmoid"], "--secure fits the logistic loss"),
        (["--mechanism", "paper"], "--mechanism paper is another protocol"),
        (["--label-holder-keeps-model"], "goes with --secure --protect-label-holder"),
    ],
)
def test_secure_vertical_refuses_what_it_does_not_take(tmp_path, capsys, extra, match):
    pytest.importorskip("tenseal")
    code = main(
        [
            "train",
            "vertical",
            "--data",
            "breast_cancer",
            "--split",
            "15,15",
            "--secure",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            *extra,
            "--out",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
