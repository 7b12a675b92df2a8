import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from dpfed.cli import main


def _svm(tmp_path, n=120, d=6, seed=0, name="train.svm", labels=None, values=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) if values is None else values
    y = np.where(X[:, 0] + X[:, 3] > 0, 1, -1) if labels is None else labels
    path = tmp_path / name
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path


def _train(tmp_path, *extra, data=None):
    data = data or _svm(tmp_path)
    out = tmp_path / "result.json"
    code = main(
        [
            "train",
            "vertical",
            "--data",
            str(data),
            "--split",
            "4,2",
            "--iterations",
            "5",
            "--quiet",
            "--out",
            str(out),
            *extra,
        ]
    )
    return code, out


def test_train_vertical_writes_the_result_schema(tmp_path, capsys):
    test = _svm(tmp_path, seed=1, name="test.svm")
    code, out = _train(tmp_path, "--test", str(test), "--baselines", "--lam", "1e-2")
    assert code == 0
    result = json.loads(out.read_text())
    assert len(result["history"]) == 5
    for entry in result["history"]:
        for key in (
            "iteration",
            "seconds",
            "train_objective",
            "test_log_loss",
            "test_accuracy",
            "epsilon",
        ):
            assert key in entry
    seconds = [h["seconds"] for h in result["history"]]
    assert seconds == sorted(seconds)
    assert result["final"]["test_accuracy"] > 0.8
    assert {"mechanism", "epsilon", "delta", "accountant"} <= set(result["privacy"])
    assert set(result["baselines"]) == {"local_only", "centralized"}
    assert result["preprocessing"]["scaling"] == "none"  # a user's file is used as given
    assert "wrote" in capsys.readouterr().out


def test_sound_run_reports_its_privacy(tmp_path):
    code, out = _train(
        tmp_path,
        "--mechanism",
        "sound",
        "--epsilon",
        "4",
        "--delta",
        "1e-5",
        "--seed",
        "3",
        "--rounds-above-rule",
    )
    assert code == 0
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["mechanism"] == "sound" and privacy["accountant"] == "pld"
    assert 3.9 < privacy["epsilon"] <= 4.0


def test_paper_run_prints_no_certified_epsilon(tmp_path, capsys):
    # party1's block is wide: d_m = 40 > N = 30
    data = _svm(tmp_path, n=30, d=44)
    out = tmp_path / "result.json"
    code = main(
        [
            "train",
            "vertical",
            "--data",
            str(data),
            "--split",
            "4,40",
            "--iterations",
            "3",
            "--mechanism",
            "paper",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--seed",
            "0",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert (
        "privacy (paper): epsilon not certified (the paper's formula gives 1 at delta = "
        "1e-05; see privacy.paper_epsilon_reason)" in printed
    )
    assert "epsilon = " not in printed
    assert "not a guarantee: party1: Lemma 1 assumes" in printed
    privacy = json.loads(out.read_text())["privacy"]
    assert privacy["epsilon"] is None and privacy["paper_epsilon"] == pytest.approx(1.0)
    assert any("lambda_min" in r for r in privacy["paper_epsilon_reason"])


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--epsilon", "0", "--delta", "1e-5", "--mechanism", "sound"], "epsilon"),
        (["--epsilon", "-2", "--delta", "1e-5", "--mechanism", "sound"], "epsilon"),
        (["--epsilon", "1", "--delta", "1.5", "--mechanism", "sound"], "delta"),
        (["--epsilon", "1", "--delta", "0", "--mechanism", "sound"], "delta"),
    ],
)
def test_bad_privacy_arguments_exit_nonzero_without_output(tmp_path, capsys, extra, match):
    code, out = _train(tmp_path, *extra)
    assert code == 2
    assert match in capsys.readouterr().err
    assert not out.exists()


def test_a_split_that_does_not_sum_to_the_features_is_refused(tmp_path, capsys):
    data = _svm(tmp_path)
    out = tmp_path / "r.json"
    code = main(
        [
            "train",
            "vertical",
            "--data",
            str(data),
            "--split",
            "3,2",
            "--iterations",
            "2",
            "--out",
            str(out),
        ]
    )
    assert code == 2 and not out.exists()
    assert "6" in capsys.readouterr().err


def test_missing_file_and_bad_labels_are_refused(tmp_path, capsys):
    code, out = _train(tmp_path, data=tmp_path / "nope.svm")
    err = capsys.readouterr().err
    assert code == 2 and not out.exists() and "nope" in err
    bad = _svm(tmp_path, labels=np.arange(120) % 3, name="bad.svm")
    code, out = _train(tmp_path, data=bad)
    assert code == 2 and not out.exists()
    assert "binary" in capsys.readouterr().err


def test_nan_values_are_refused(tmp_path, capsys):
    path = tmp_path / "nan.svm"
    path.write_text("1 1:0.5 2:nan 5:1\n-1 1:0.2 3:1 6:2\n")
    code, out = _train(tmp_path, data=path)
    assert code == 2 and not out.exists()
    assert "finite" in capsys.readouterr().err


def test_parties_with_different_row_counts_are_refused():
    from dpfed import DpfedInputError
    from dpfed.protocols.vertical.driver import train_vertical

    with pytest.raises(DpfedInputError, match="row counts differ"):
        train_vertical([np.ones((5, 2)), np.ones((4, 2))], np.ones(5))


@pytest.mark.parametrize("z, steps", [(1.0, 10), (2.5, 3), (0.8, 50)])
def test_privacy_epsilon_equals_dp_accounting_pld(capsys, z, steps):
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    assert (
        main(
            [
                "privacy",
                "epsilon",
                "--noise-multiplier",
                str(z),
                "--steps",
                str(steps),
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    printed = float(capsys.readouterr().out.strip().splitlines()[-1])
    acc = PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), steps)
    assert abs(printed - acc.get_epsilon(1e-5)) <= 1e-6
    # these multipliers lie outside the classical bound's range (per-step epsilon above 1), so
    # the advanced accountant refuses them
    assert (
        main(
            [
                "privacy",
                "epsilon",
                "--noise-multiplier",
                str(z),
                "--steps",
                str(steps),
                "--delta",
                "1e-5",
                "--accountant",
                "advanced",
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert "proven only for a per-step epsilon <= 1" in captured.err and not captured.out


@pytest.mark.parametrize(
    "command",
    [
        ["privacy", "epsilon", "--noise-multiplier", "2", "--steps", "10", "--delta", "1e-5"],
        ["privacy", "calibrate", "--epsilon", "1", "--steps", "10", "--delta", "1e-5"],
    ],
)
def test_privacy_json_prints_one_json_object_and_nothing_else(capsys, command):
    assert main(command) == 0
    plain = float(capsys.readouterr().out.strip())
    assert main([*command, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    key = "epsilon" if command[1] == "epsilon" else "noise_multiplier"
    assert printed[key] == plain


def test_privacy_epsilon_advanced_bounds_pld_inside_its_range(capsys):
    args = ["privacy", "epsilon", "--noise-multiplier", "20", "--steps", "10", "--delta", "1e-5"]
    assert main(args) == 0
    pld = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*args, "--accountant", "advanced"]) == 0
    corollary = float(capsys.readouterr().out.strip().splitlines()[-1])
    assert pld <= corollary


@pytest.mark.parametrize("epsilon", ["20", "50"])
def test_privacy_calibrate_basic_refuses_outside_the_classical_range(capsys, epsilon):
    code = main(
        [
            "privacy",
            "calibrate",
            "--accountant",
            "basic",
            "--epsilon",
            epsilon,
            "--delta",
            "1e-5",
            "--steps",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and not captured.out
    assert captured.err.startswith(
        "dpfed: error: accountant 'basic' uses the classical Gaussian bound, proven only for a "
        "per-step epsilon <= 1, i.e. noise multiplier >= 4.84 at per-step delta 1e-05; found "
        f"target epsilon {epsilon}"
    )
    assert "Use accountant 'pld' or 'rdp'." in captured.err


def test_privacy_epsilon_basic_refuses_outside_the_classical_range(capsys):
    code = main(
        [
            "privacy",
            "epsilon",
            "--accountant",
            "basic",
            "--noise-multiplier",
            "0.3",
            "--delta",
            "1e-5",
            "--steps",
            "1",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and not captured.out
    assert "found noise multiplier 0.3 (per-step epsilon 16.1)" in captured.err


@pytest.mark.parametrize("accountant", ["basic", "advanced"])
def test_privacy_calibrate_classical_round_trips_inside_its_range(capsys, accountant):
    assert (
        main(
            [
                "privacy",
                "calibrate",
                "--accountant",
                accountant,
                "--epsilon",
                "0.8",
                "--delta",
                "1e-5",
                "--steps",
                "1",
                "--json",
            ]
        )
        == 0
    )
    info = json.loads(capsys.readouterr().out)
    assert 0.8 * (1 - 1e-9) <= info["epsilon_spent"] <= 0.8


def test_privacy_calibrate_round_trips(capsys):
    assert (
        main(
            ["privacy", "calibrate", "--epsilon", "2", "--delta", "1e-5", "--steps", "10", "--json"]
        )
        == 0
    )
    info = json.loads(capsys.readouterr().out)
    assert info["epsilon_spent"] <= 2.0 and info["epsilon_spent"] > 1.98


def test_privacy_epsilon_rejects_bad_delta(capsys):
    assert (
        main(["privacy", "epsilon", "--noise-multiplier", "1", "--steps", "5", "--delta", "2"]) == 2
    )
    assert "delta" in capsys.readouterr().err


def test_demo_runs_and_compares(capsys, tmp_path):
    pytest.importorskip("tenseal")
    assert main(["demo", "--out", str(tmp_path / "demo.json")]) == 0
    out = capsys.readouterr().out
    assert "top alone" in out and "both halves pooled" in out and "epsilon=8" in out
    shown = json.loads((tmp_path / "demo.json").read_text())
    secure = shown["runs"]["secure vertical, DP eps=8"]
    alone = shown["baselines"]["top alone (its pixels, its labels)"]
    # federation pays: the private model beats the label holder's own, the other half counts
    assert secure["final"]["test_log_loss"] < alone["test_log_loss"] - 0.03
    assert secure["bottom_score_share"] > 0.1
    assert secure["privacy"]["epsilon"] <= 8.0 + 1e-9


@pytest.mark.networked
def test_console_script_is_installed():
    res = subprocess.run(
        [sys.executable, "-m", "dpfed.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert res.stdout.startswith("dpfed")


def test_privacy_design_alpha_fits_and_chooses(capsys):
    from dpfed.protocols.decentralized.alpha_design import choose_alpha, fit_accuracy_loss

    alphas, losses = [0.01, 0.1, 0.5, 1.0], [0.9, 0.6, 0.45, 0.42]
    assert (
        main(
            [
                "privacy",
                "design-alpha",
                "--alphas",
                "0.01,0.1,0.5,1",
                "--losses",
                "0.9,0.6,0.45,0.42",
                "--json",
            ]
        )
        == 0
    )
    shown = json.loads(capsys.readouterr().out)
    want = choose_alpha(fit_accuracy_loss(alphas, losses))
    assert shown["choice"]["alpha"] == want.alpha
    assert main(["privacy", "design-alpha", "--alphas", "0.1,x", "--losses", "1,2"]) == 2
    assert "--alphas must be comma-separated numbers" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["reproduce", "consensus", "--quick"],
        ["reproduce", "decentralized", "--quick"],
        ["reproduce", "vertical", "--quick"],
        ["reproduce", "bayes-linreg", "--quick"],
        ["reproduce", "dca-scaling", "--quick"],
        ["audit", "--all"],
        ["dca", "bench", "--clients", "10", "--dim", "2"],
    ],
)
def test_a_ray_address_needs_the_ray_engine(command, tmp_path, capsys):
    code = main(
        [*command, "--out", str(tmp_path / "out"), "--ray-address", "127.0.0.1:6379"]
        if command[0] != "dca"
        else [*command, "--ray-address", "127.0.0.1:6379"]
    )
    assert code == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["train", "consensus", "--data", "breast_cancer", "--clients", "3", "--iterations", "2"],
        ["demo"],
        ["run", "--config", "job.toml"],
    ],
)
def test_a_result_file_that_cannot_be_written_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("")
    for out, says in [
        ("folder", "'folder' is a folder; expected the path of a file"),
        ("plain/result.json", "'plain/result.json': '" + str(tmp_path / "plain") + "' is a file"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main([*command, "--out", out])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "argument --out" in err and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "plain"]
    assert not any((tmp_path / "folder").iterdir())


def test_an_output_folder_that_is_a_file_is_refused(tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(SystemExit) as stop:
        main(["reproduce", "consensus", "--quick", "--out", str(plain)])
    assert stop.value.code == 2
    assert f"{str(plain)!r} is a file; expected a folder" in capsys.readouterr().err


def test_output_paths_that_can_be_made_are_accepted(tmp_path):
    from dpfed.cli.common import output_path

    assert output_path("file")(str(tmp_path / "new" / "deeper" / "r.json"))
    assert output_path("folder")(str(tmp_path / "new"))
    (tmp_path / "existing").mkdir()
    assert output_path("file or folder")(str(tmp_path / "existing"))
    assert output_path("file or folder")(str(tmp_path / "audit.json"))


@pytest.mark.parametrize(
    ("out", "says"),
    [
        ("/dev/null", "is a character device; only a regular file is ever replaced"),
        ("/proc/r.json", "lies under /proc"),
        ("/sys/r.json", "lies under /sys"),
    ],
)
def test_an_output_onto_a_device_or_a_kernel_tree_is_refused(tmp_path, capsys, out, says):
    before = os.stat("/dev/null")
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "train",
                "consensus",
                "--data",
                "breast_cancer",
                "--clients",
                "3",
                "--iterations",
                "2",
                "--out",
                out,
            ]
        )
    assert stop.value.code == 2
    assert says in capsys.readouterr().err
    after = os.stat("/dev/null")  # the device is untouched
    assert (after.st_mode, after.st_rdev, after.st_ino) == (
        before.st_mode,
        before.st_rdev,
        before.st_ino,
    )


def test_an_output_onto_a_fifo_is_refused(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--out", str(fifo)])
    assert stop.value.code == 2
    assert "is a FIFO" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
