"""``dpfed dca bench`` and ``dpfed reproduce dca-scaling``."""

import json

import pytest

from dpfed.cli import main


def test_bench_prints_seconds_last_and_compares_with_the_paper(capsys):
    code = main(
        [
            "dca",
            "bench",
            "--clients",
            "100",
            "--dim",
            "10",
            "--compute-nodes",
            "10",
            "--repeats",
            "2",
            "--workers",
            "1",
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("seconds: ")
    seconds = float(lines[-1].split(":")[1])
    assert seconds > 0.0
    text = "\n".join(lines)
    assert "1.72 s" in text and "in-process simulation" in text and "Spark cluster" in text
    assert "run 2/2" in text and "(discrete noise)" in text


def test_bench_json_and_a_cell_outside_the_table(capsys):
    code = main(
        [
            "dca",
            "bench",
            "--clients",
            "50",
            "--dim",
            "3",
            "--compute-nodes",
            "3",
            "--tolerated",
            "2",
            "--drop",
            "2",
            "--encrypt",
            "--workers",
            "1",
            "--json",
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    cell = json.loads(lines[-2])
    assert cell["dropped"] == 2 and cell["encrypt"] and cell["paper_seconds"] is None
    assert cell["check"]["in_noise_stds"] < 8
    assert float(lines[-1].split(":")[1]) == pytest.approx(cell["median"], abs=1e-3)
    assert "not in the paper's Table 1" in "\n".join(lines)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--drop", "2"], "--drop must be at most --tolerated"),
        (["--workers", "many"], "--workers must be 'auto'"),
        (["--tolerated", "99"], "tolerated must be at most N - 1"),
    ],
)
def test_bench_bad_input_exits_2(capsys, extra, message):
    code = main(["dca", "bench", "--clients", "10", "--dim", "2", *extra])
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("noise", ["gaussian", "discrete"])
def test_reproduce_dca_scaling_quick(tmp_path, capsys, noise):
    out = tmp_path / "dca"
    code = main(
        [
            "reproduce",
            "dca-scaling",
            "--out",
            str(out),
            "--quick",
            "--quiet",
            "--workers",
            "1",
            "--noise",
            noise,
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["plan"]["noise"] == noise
    said = "the paper's: continuous Gaussian" if noise == "gaussian" else "exact discrete"
    assert any(said in note for note in summary["notes"])
    assert {"dca_scaling.png", "dca_scaling.json", "summary.md", "summary.json"} <= {
        p.name for p in out.iterdir()
    }
    assert len(summary["cells"]) == 4
    for cell in summary["cells"]:
        assert cell["paper_seconds"] is not None and cell["ratio"] > 0
    text = (out / "summary.md").read_text()
    assert "Spark" in text and "in-process simulation" in text
    assert (out / "dca_scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(capsys.readouterr().out)["quick"] is True


def test_bench_on_ray_prints_each_nodes_memory_and_the_same_total(capsys, local_ray):
    args = ["dca", "bench", "--clients", "300", "--dim", "20", "--compute-nodes", "4"]
    assert main(args) == 0
    here = capsys.readouterr().out
    assert main([*args, "--engine", "ray"]) == 0
    on_ray = capsys.readouterr().out
    assert "Ray tasks" in on_ray and "worker(s), peak resident memory" in on_ray
    total = [line for line in here.splitlines() if line.startswith("encoded total")]
    assert total and total == [ln for ln in on_ray.splitlines() if ln.startswith("encoded total")]
