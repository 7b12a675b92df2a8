"""The leader's own logic, with the parties replaced by scripted connections."""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest

from dpfed.runtime.certs import load_identity
from dpfed.runtime.control import AccountRequest
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.leader import JobStopped, Leader
from dpfed.runtime.transport import RemoteError, TlsIdentity, serve

PARTIES = [
    ("label", "breast_cancer", (0, 15)),
    ("bank", "breast_cancer", (15, 30)),
]


class ScriptedConnection:
    """Fails the first ``failures`` calls with ``code``, then answers ``{"ok": True}``."""

    def __init__(self, name: str, failures: int, code=grpc.StatusCode.UNAVAILABLE) -> None:
        self.name, self.failures, self.code, self.calls = name, failures, code, 0

    def control(self, frame: bytes, *, timeout: float) -> dict:
        self.calls += 1
        if self.calls <= self.failures:
            raise RemoteError(self.name, self.code, "failed to connect to all addresses")
        return {"ok": True}

    def close(self) -> None:
        pass


def _leader(netjob, grace: float) -> Leader:
    job = netjob(PARTIES, params={"iterations": 3}, job={"grace": grace})
    leader = Leader(load_job(job.config), progress=False)
    return leader


def test_a_query_waits_for_a_party_back_within_grace(netjob):
    # a party restarted within the grace period: the leader's channel fails calls at once
    # until it has reconnected; the job's end must not take that for a lost party
    leader = _leader(netjob, grace=5.0)
    leader.connections["bank"] = ScriptedConnection("bank", failures=3)
    assert leader._query("bank", AccountRequest) == {"ok": True}
    assert leader.connections["bank"].calls == 4


def test_a_query_stops_the_job_after_grace(netjob):
    leader = _leader(netjob, grace=0.5)
    for name in leader.connections:
        leader.connections[name] = ScriptedConnection(name, failures=10**6)
    with pytest.raises(JobStopped, match=r"bank.*AccountRequest.*grace 0.5 s.*--resume"):
        leader._query("bank", AccountRequest)


def test_a_query_refused_is_not_tried_again(netjob):
    leader = _leader(netjob, grace=5.0)
    leader.connections["bank"] = ScriptedConnection(
        "bank", failures=1, code=grpc.StatusCode.FAILED_PRECONDITION
    )
    with pytest.raises(RemoteError, match="FAILED_PRECONDITION"):
        leader._query("bank", AccountRequest)
    assert leader.connections["bank"].calls == 1


THREE_PARTIES = [
    ("label", "breast_cancer", (0, 10)),
    ("bank", "breast_cancer", (10, 20)),
    ("shop", "breast_cancer", (20, 30)),
]


@pytest.mark.parametrize(
    ("case", "says"),
    [
        (
            "foreign certificate",
            "shop at {address} presented a certificate not signed by this job's CA",
        ),
        ("foreign trust", "shop at {address} closed the connection during the TLS handshake"),
    ],
)
def test_a_certificate_failure_is_named_at_open_not_waited_for(
    netjob, job_certs, foreign_certs, case, says
):
    """At shop's address a process presents a certificate of another CA, or trusts another
    CA (so it drops the leader's handshake): the leader names the failure as soon as the
    handshakes fail, long before its round timeout (110 s here, more than the run's own
    100 s: a leader that waited it out would not finish in time)."""
    job = netjob(THREE_PARTIES, params={"iterations": 2}, job={"round_timeout": 110.0})
    address = load_job(job.config).party("shop").address
    if case == "foreign certificate":
        identity = load_identity(
            foreign_certs / "shop.pem", foreign_certs / "shop.key", foreign_certs / "ca.pem"
        )
    else:
        own = load_identity(job_certs / "shop.pem", job_certs / "shop.key", job_certs / "ca.pem")
        identity = TlsIdentity(
            "shop", own.certificate_pem, own.key_pem, (foreign_certs / "ca.pem").read_bytes()
        )
    impostor = serve(identity, address, {"Control": lambda request, peer: b"{}"}, max_bytes=2**20)
    try:
        for name in ("label", "bank"):
            job.start_party(name)
        done = job.run(timeout=100)
        assert done.returncode == 2, done.stderr
        assert says.format(address=address) in done.stderr, done.stderr
        assert "never reached" not in done.stderr
        assert not job.out.exists()
        assert job.wait_parties() == {"label": 1, "bank": 1}  # told to abort
    finally:
        impostor.stop(0)


def test_a_log_shows_the_first_rounds_about_twenty_lines_and_the_last(netjob):
    leader = _leader(netjob, grace=1.0)
    leader.spec = replace(leader.spec, params=leader.spec.params | {"iterations": 300})
    shown = [r for r in range(1, 301) if leader._logs_round(r)]
    assert shown[:3] == [1, 2, 3] and shown[-1] == 300
    assert 20 <= len(shown) <= 25
    leader.spec = replace(leader.spec, params={})  # rounds from a rule: every round
    assert all(leader._logs_round(r) for r in range(1, 50))


def test_the_summary_comes_before_the_page_s_last_seconds(netjob, monkeypatch):
    """``on_result`` (the CLI prints the summary there) runs as soon as the result exists,
    before the leader keeps serving the page for ``monitor_keep`` seconds."""
    events = []
    leader = _leader(netjob, grace=1.0)
    leader.monitor = "127.0.0.1:0"
    leader.monitor_keep = 30.0

    class Page:
        url = "http://127.0.0.1:0/"

        def __init__(self, *args):
            pass

        def start(self):
            return self

        def stop(self):
            events.append("page stopped")

    monkeypatch.setattr("dpfed.runtime.leader.MonitorServer", Page)
    monkeypatch.setattr(leader, "_lead", lambda out: {"protocol": "vertical"})
    monkeypatch.setattr(
        "dpfed.runtime.leader.time.sleep", lambda seconds: events.append(f"kept {seconds:g} s")
    )
    leader.run("result.json", on_result=lambda result: events.append("summary"))
    assert events == ["summary", "kept 30 s", "page stopped"]
