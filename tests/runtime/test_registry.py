"""The protocol registry: the runtime finds every protocol through it and names none."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from dpfed._validation import DpfedInputError
from dpfed.parameters import job_parameters, param
from dpfed.runtime import registry
from dpfed.runtime.jobfile import load_job
from dpfed.runtime.registry import PROTOCOL_REGISTRY, FederatedProtocol, JobRecord, get_protocol

RUNTIME = Path(registry.__file__).parent


@pytest.mark.parametrize("name", sorted(PROTOCOL_REGISTRY))
def test_every_registered_protocol_implements_the_interface_under_its_name(name):
    protocol = get_protocol(name)
    assert isinstance(protocol, FederatedProtocol) and protocol.name == name
    assert protocol.holds in ("columns", "rows")
    assert protocol.params and all(p.name == k for k, p in protocol.params.items())
    assert protocol.report is None or isinstance(protocol.report, type)


def test_an_unknown_protocol_is_refused_naming_the_registered_ones():
    with pytest.raises(DpfedInputError, match=r"\[job\].protocol must be one of .*'vertical'"):
        get_protocol("gossip")


def test_a_protocol_missing_a_member_cannot_be_built():
    class Incomplete(FederatedProtocol):
        name = "incomplete"
        params: ClassVar[dict] = {}
        holds = "rows"
        dataless_role = None
        same_rows = False
        messages = ()
        report = None

        def check_parties(self, parties):
            pass

        def private(self, params):
            return False

        def host(self, spec, name):
            raise NotImplementedError

    with pytest.raises(TypeError, match="result"):
        Incomplete()


@dataclass(frozen=True)
class EchoConfig:
    iterations: int = param(1, help="rounds")
    mechanism: str = param("none", help="privacy mechanism", choices=("none", "gaussian"))


class Echo(FederatedProtocol):
    """The smallest protocol: every party holds rows; no server."""

    name = "echo"
    params: ClassVar[dict] = job_parameters(EchoConfig)
    holds = "rows"
    dataless_role = None
    same_rows = False
    messages = ()
    report = None

    def check_parties(self, parties):
        if len(parties) > 3:
            raise DpfedInputError(f"an echo job has at most 3 parties. Found {len(parties)}.")

    def private(self, params):
        return params.get("mechanism", "none") != "none"

    def host(self, spec, name):
        raise NotImplementedError

    def result(self, spec, record: JobRecord):
        return {"protocol": self.name, "accounts": record.accounts}


ECHO = Echo()


def _job_file(tmp_path: Path, params: str, n_parties: int = 2) -> Path:
    parties = "".join(
        f'[[party]]\nname = "p{k}"\naddress = "127.0.0.1:{41000 + k}"\ndata = "x.npy"\n'
        f'rows = [0, 5]\ncertificate = "p{k}.pem"\nkey = "p{k}.key"\n\n'
        for k in range(n_parties)
    )
    text = (
        '[job]\nid = "e"\nprotocol = "echo"\n\n'
        f"[params]\n{params}\n\n"
        '[tls]\nca = "ca.pem"\n\n'
        '[leader]\naddress = "127.0.0.1:40999"\ncertificate = "l.pem"\nkey = "l.key"\n\n' + parties
    )
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def test_a_new_protocol_needs_only_its_object_and_one_registry_line(tmp_path, monkeypatch):
    monkeypatch.setitem(PROTOCOL_REGISTRY, "echo", f"{__name__}:ECHO")
    spec = load_job(_job_file(tmp_path, 'iterations = 3\nmechanism = "gaussian"'))
    assert spec.protocol == "echo" and spec.params == {"iterations": 3, "mechanism": "gaussian"}
    assert spec.evaluate == "test"  # a mechanism keeps exact figures home by default
    assert [p.rows for p in spec.parties] == [(0, 5), (0, 5)]
    with pytest.raises(DpfedInputError, match=r"\[params\] has unknown keys \['rho'\]"):
        load_job(_job_file(tmp_path, "rho = 1.0"))
    with pytest.raises(DpfedInputError, match=r"at most 3 parties\. Found 4"):
        load_job(_job_file(tmp_path, "iterations = 3", n_parties=4))


def _named_protocols(path: Path) -> list[str]:
    """String constants in ``path`` that are protocol names compared or looked up."""
    names = set(PROTOCOL_REGISTRY)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in names:
                    found.append(f"{path.name}:{node.lineno} {side.value!r}")
    return found


RUNNING = [*sorted(RUNTIME.glob("*.py")), RUNTIME.parent / "cli" / "net.py"]


@pytest.mark.parametrize("path", RUNNING, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_runtime_never_branches_on_a_protocol_name(path):
    """The runtime and the command that leads any job ask the protocol (its members), never
    which protocol it is, nor its parameters' names (but the registry's stated default)."""
    assert _named_protocols(path) == []
    if path.name != "registry.py":
        assert '"iterations"' not in path.read_text()


def test_the_rules_the_runtime_follows_are_members_of_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(PROTOCOL_REGISTRY, "echo", f"{__name__}:ECHO")
    spec = load_job(_job_file(tmp_path, "iterations = 3"))
    assert ECHO.reporter(spec) == spec.names[0]  # the first party reports rounds
    assert ECHO.planned_rounds(spec) == 3
    assert ECHO.planned_rounds(load_job(_job_file(tmp_path, 'mechanism = "none"'))) is None
    assert ECHO.result_kind == "model"
    kinds = {name: get_protocol(name).result_kind for name in PROTOCOL_REGISTRY}
    assert {k for k, v in kinds.items() if v == "aggregate"} == {"secure_sum"}
    assert set(kinds.values()) == {"model", "aggregate"}


def test_a_host_missing_a_member_cannot_be_built():
    from dpfed.runtime.hosting import RoleDelegate

    class Partial(RoleDelegate):
        plan: ClassVar[list] = []
        holds_data = True
        exact_release = False
        ledger_support = True
        ledger_refusal = ""
        events: ClassVar[list] = []

        def model(self):
            return []

        def describe(self):
            return {}

        def final(self):
            return {}

    with pytest.raises(TypeError, match="losses"):
        Partial()
