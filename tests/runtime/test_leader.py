"""The leader's own logic, with the parties replaced by scripted connections."""

from __future__ import annotations

import grpc
import pytest

from dpfed.runtime.control import AccountRequest
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.leader import JobStopped, Leader
from dpfed.runtime.transport import RemoteError

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
        "bank", failures=1, code=grpc.StatusCode.FAILED_PRECONDITION)
    with pytest.raises(RemoteError, match="FAILED_PRECONDITION"):
        leader._query("bank", AccountRequest)
    assert leader.connections["bank"].calls == 1
