"""The secure-sum host's checks: the vectors' length, the noise plan, secrets kept on disk."""

from __future__ import annotations

import math
import stat

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.protocols.secure_sum.host import SecureSumHost, noise_plan
from dpfed.runtime.jobfile import load_job


def _job(tmp_path, params: str, dim_of_data: int = 3):
    np.save(tmp_path / "v.npy", np.ones((2, dim_of_data)))
    parties = "".join(
        f'[[party]]\nname = "c{i}"\naddress = "127.0.0.1:{6001 + i}"\ndata = "v.npy"\n'
        f'rows = [{i}, {i + 1}]\ncertificate = "x.pem"\nkey = "x.key"\n\n'
        for i in range(2)
    )
    text = (
        '[job]\nid = "s"\nprotocol = "secure_sum"\n\n[params]\n' + params + "\n\n"
        '[tls]\nca = "ca.pem"\n\n[leader]\naddress = "127.0.0.1:6000"\ncertificate = "l.pem"\n'
        'key = "l.key"\n\n[[party]]\nname = "n0"\naddress = "127.0.0.1:6100"\n'
        'role = "compute"\ncertificate = "x.pem"\nkey = "x.key"\n\n' + parties
    )
    (tmp_path / "job.toml").write_text(text)
    return load_job(tmp_path / "job.toml")


def test_client_rows_must_have_the_jobs_dimension(tmp_path):
    spec = _job(tmp_path, "dim = 4", dim_of_data=3)
    with pytest.raises(DpfedInputError, match=r"3 columns.*dim = 4"):
        SecureSumHost(spec, "c0")


def test_dim_is_required(tmp_path):
    with pytest.raises(DpfedInputError, match="dim"):
        SecureSumHost(_job(tmp_path, 'mechanism = "none"'), "n0")


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ('mechanism = "gaussian"', "Missing"),
        ('mechanism = "laplace"', "gaussian"),
        ("noise_std = 1.0", "need mechanism"),
        ('mechanism = "gaussian"\nnoise_std = -1.0', "> 0"),
    ],
)
def test_bad_noise_plans_are_refused(tmp_path, params, pattern):
    with pytest.raises(DpfedInputError, match=pattern):
        noise_plan(_job(tmp_path, "dim = 3\n" + params))


def test_secrets_are_owner_only_and_kept_across_restarts(tmp_path):
    spec = _job(tmp_path, 'dim = 3\nmechanism = "gaussian"\nnoise_std = 1.0')
    first = SecureSumHost(spec, "c0")
    again = SecureSumHost(spec, "c0")
    assert first.role.secret == again.role.secret
    path = spec.party("c0").workdir / "s" / "dca-client.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    node = SecureSumHost(spec, "n0")
    assert node.role.key.public_bytes == SecureSumHost(spec, "n0").role.key.public_bytes
    assert not first.exact_release and not node.holds_data


def test_only_a_sensitivity_makes_a_share_accountable(tmp_path):
    bare = SecureSumHost(_job(tmp_path, 'dim = 3\nmechanism = "gaussian"\nnoise_std = 2.0'), "c0")
    assert not bare.ledger_support and bare.plan == []
    spec = _job(
        tmp_path,
        'dim = 3\nmechanism = "gaussian"\nnoise_std = 2.0\nl2_sensitivity = 4.0'
        '\nnoise = "continuous"',
    )
    host = SecureSumHost(spec, "c1")
    # two clients, T = 0: sigma_std = sqrt(2 - 0 - 1) * 2 = 2, multiplier 2 / 4
    assert host.ledger_support and host.plan == [0.5]
    assert host.events == []  # nothing has left yet
    # the default exact ring noise: s^2 = (2 * 2^24)^2, sensitivity 4 * 2^24 + sqrt 3 ring
    # units, a Renyi-DP-only release at multiplier 2^25 / (2^26 + sqrt 3), less 1e-9
    spec = _job(tmp_path, 'dim = 3\nmechanism = "gaussian"\nnoise_std = 2.0\nl2_sensitivity = 4.0')
    ring = SecureSumHost(spec, "c1")
    (release,) = ring.plan
    assert release.mechanism == "discrete_gaussian"
    assert release.noise_multiplier == pytest.approx(
        2**25 / (2**26 + math.sqrt(3)) * (1 - 1e-9), rel=1e-15
    )
    assert ring.noise["sigma2"] == 2**50


def test_classic_calibration_above_epsilon_one_is_refused_before_any_noise(tmp_path):
    params = (
        'dim = 3\nmechanism = "gaussian"\nepsilon = 2.0\ndelta = 1e-5\n'
        'l2_sensitivity = 1.0\ncalibration = "classic"'
    )
    pattern = r"method 'classic'.*proven only for a per-release epsilon <= 1.*'pld' or 'rdp'"
    # every process refuses the job file when it reads it, before it reads secrets or draws
    # noise (so a client never builds its side)
    with pytest.raises(DpfedInputError, match=pattern):
        _job(tmp_path, params)
    assert not (tmp_path / "work").exists()
    # inside the range the classic calibration is accepted
    ok = _job(tmp_path, params.replace("epsilon = 2.0", "epsilon = 1.0"))
    assert noise_plan(ok)["calibration"].classic_valid


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ("tolerated = 2", r"\[params\].tolerated must be in \[0, 1\] for 2 clients"),
        ("dim = 0", r"needs \[params\].dim"),
        ("deadline = 0.0", r"\[params\].deadline must be a number of seconds > 0. Found 0.0"),
        ("deadline = -3", r"\[params\].deadline must be .* Found -3"),
    ],
)
def test_a_bad_secure_sum_file_is_refused_when_it_is_read(tmp_path, params, pattern):
    with pytest.raises(DpfedInputError, match=pattern):
        _job(tmp_path, params if params.startswith("dim") else f"dim = 3\n{params}")


def test_only_a_compute_node_closes_and_only_a_deadline_makes_clients_droppable(tmp_path):
    from dpfed.runtime.registry import Dropouts, get_protocol

    protocol = get_protocol("secure_sum")
    assert protocol.dropouts(_job(tmp_path, "dim = 3\ntolerated = 1")) is None
    spec = _job(tmp_path, "dim = 3\ntolerated = 1\ndeadline = 4.5")
    assert protocol.dropouts(spec) == Dropouts(("c0", "c1"), 1, 4.5)
    with pytest.raises(DpfedInputError, match=r"c0 is a client .* only a compute node"):
        SecureSumHost(spec, "c0").close()
    node = SecureSumHost(spec, "n0")
    with pytest.raises(
        DpfedInputError,
        match=r"0 of 2 clients; 2 are missing \(c0, c1\).*"
        r"tolerated = 1",
    ):
        node.close()
    assert not node.role.closed
    # a protocol without droppable parties keeps the runtime's default: a refusal
    from dpfed.runtime.hosting import ProtocolHost

    with pytest.raises(DpfedInputError, match="no submission deadline"):
        ProtocolHost.close(node)
