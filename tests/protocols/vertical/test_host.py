"""One party's side of a networked vertical job (VerticalHost) and the leader's result.

Under the paper mechanism: a party with a privacy budget refuses the job (``ledger_support``
is False, the runtime's party refuses such a host when it holds a budget), Lemma 1's
eigenvalue premise is checked on the party's own block and stays with the party (its own
standard error, never a message or its final account), and the result certifies no epsilon.
"""

from __future__ import annotations

import math

import pytest

from dpfed._validation import DpfedInputError
from dpfed.engines.inprocess import InProcessEngine
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical.host import VerticalHost, vertical_result
from dpfed.runtime.jobfile import LEADER, load_job
from dpfed.runtime.wire import decode, encode

#: breast_cancer (30 columns, 398 training rows): label 25 columns (25^2 > 398, so the shapes
#: rule Lemma 1's premise out), bank 5 (the shapes do not).
SPLIT = (("label", 0, 25), ("bank", 25, 30))


def _job(tmp_path, params: dict):
    parties = "".join(
        f"""
[[party]]
name = "{name}"
address = "127.0.0.1:{port}"
data = "breast_cancer"
columns = [{a}, {b}]
certificate = "c.pem"
key = "c.key"
"""
        for port, (name, a, b) in enumerate(SPLIT, start=1)
    )

    def toml(v):
        if isinstance(v, bool):
            return str(v).lower()
        return f'"{v}"' if isinstance(v, str) else repr(v)

    values = "\n".join(f"{k} = {toml(v)}" for k, v in params.items())
    (tmp_path / "job.toml").write_text(
        f"""[job]
id = "j"
protocol = "vertical"
[params]
{values}
[tls]
ca = "ca.pem"
[leader]
address = "127.0.0.1:9"
certificate = "l.pem"
key = "l.key"
"""
        + parties
    )
    return load_job(tmp_path / "job.toml")


PAPER = {"mechanism": "paper", "epsilon": 1.0, "delta": 1e-5, "iterations": 2, "lam": 1e-2}
SOUND = {
    "mechanism": "sound",
    "epsilon": 2.0,
    "delta": 1e-5,
    "iterations": 2,
    "rounds_above_rule": True,
}


@pytest.mark.parametrize(
    ("params", "supported"), [(PAPER, False), (SOUND, True), ({"iterations": 2}, True)]
)
def test_only_the_paper_mechanism_is_refused_by_the_budget_ledger(tmp_path, params, supported):
    spec = _job(tmp_path, params)
    assert VerticalHost(spec, "bank").ledger_support is supported


class _Leader:
    """Collects the round reports, each one through the wire format."""

    name = LEADER

    def __init__(self) -> None:
        self.history: list[dict] = []

    def handle(self, message):
        assert isinstance(message, RoundReport)
        self.history.append(decode(encode(message, job="j", seq=0)).message.entry())
        return []


def test_paper_premise_stays_with_the_party_and_the_result_certifies_no_epsilon(tmp_path, capsys):
    spec = _job(tmp_path, PAPER)
    hosts = {name: VerticalHost(spec, name) for name, _, _ in SPLIT}
    logged = capsys.readouterr().err
    for name, host in hosts.items():
        assert f"[{name}] paper mechanism: Lemma 1's premise" in logged
        assert host.eigenvalue_premise is not None
    assert hosts["label"].eigenvalue_premise.holds is False  # d_m^2 = 625 > N = 398
    assert hosts["bank"].eigenvalue_premise.min_eigenvalue is not None

    leader = _Leader()
    InProcessEngine().run({**hosts, LEADER: leader}, hosts["label"].start())
    assert len(leader.history) == 2
    assert all(entry["epsilon"] is None for entry in leader.history)
    finals = {name: host.final() for name, host in hosts.items()}
    for name, host in hosts.items():  # nothing about the spectrum leaves the party
        shared = repr(finals[name]) + repr(host.describe())
        assert "eigen" not in shared and "lambda" not in shared

    n = hosts["label"].n_samples
    result = vertical_result(spec, leader.history, finals, n_samples=n, seconds=0.0)
    privacy = result["privacy"]
    assert privacy["epsilon"] is None and result["final"]["epsilon"] is None
    assert math.isfinite(privacy["paper_epsilon"])
    assert privacy["paper_epsilon"] == pytest.approx(1.0, rel=1e-6)
    reasons = privacy["paper_epsilon_reason"]
    assert len(reasons) == 3 and "unbounded Gaussian noise" in reasons[0]
    assert reasons[1].startswith("label:") and "d_m^2 = 625 > N" in reasons[1]
    assert reasons[2].startswith("bank:") and "not checked across parties" in reasons[2]
    assert privacy["per_party"]["label"]["eigenvalue_premise"] is False
    assert privacy["per_party"]["bank"]["eigenvalue_premise"] is None


def test_a_networked_sound_job_says_its_weight_and_the_cost_of_rounds_above_the_rule(tmp_path):
    """Epsilon 2 on these rows: the rule picks 1 round; the job file asks for 2."""
    spec = _job(tmp_path, SOUND)
    hosts = {name: VerticalHost(spec, name) for name, _, _ in SPLIT}
    leader = _Leader()
    InProcessEngine().run({**hosts, LEADER: leader}, hosts["label"].start())
    weight = leader.history[-1]["passive_weight"]
    assert 0.0 <= weight <= 1.0
    finals = {name: host.final() for name, host in hosts.items()}
    n = hosts["label"].n_samples
    notes = vertical_result(spec, leader.history, finals, n_samples=n, seconds=0.0)["privacy"][
        "notes"
    ]
    assert any(f"models by {weight:.3g}" in note for note in notes)
    (cost,) = [note for note in notes if note.startswith("rounds: 2, above the 1")]
    assert "per-round noise multiplier" in cost


def test_a_job_file_with_rounds_above_the_rule_is_refused_by_every_party(tmp_path):
    """300 rounds at epsilon 1: refused, naming the per-round noise, unless the job file says
    rounds_above_rule = true; the rule's own count (iterations left out) runs."""
    params = {"mechanism": "sound", "epsilon": 1.0, "delta": 1e-5, "iterations": 300}
    spec = _job(tmp_path, params)
    for name, _, _ in SPLIT:
        with pytest.raises(DpfedInputError) as refused:
            VerticalHost(spec, name)
        message = str(refused.value)
        assert "[params].iterations = 300 is above the 1 round(s)" in message
        assert "per-round noise multiplier" in message
        assert "rounds_above_rule = true" in message
    allowed = _job(tmp_path, params | {"rounds_above_rule": True})
    assert VerticalHost(allowed, "bank").plan
    ruled = _job(tmp_path, {k: v for k, v in params.items() if k != "iterations"})
    assert VerticalHost(ruled, "bank").setup.config.iterations == 1
    with pytest.raises(DpfedInputError, match="rounds_above_rule must be bool"):
        _job(tmp_path, params | {"rounds_above_rule": "yes"})  # refused when the file is read
