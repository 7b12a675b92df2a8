"""A vertical job file with ``[params] secure = true``: the secure protocol, its refusals."""

from __future__ import annotations

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.jobfile import load_job


def _job(tmp_path, params: str, *, parties=2, job: str = ""):
    lines = [
        "[job]",
        'id = "sec"',
        'protocol = "vertical"',
        job,
        "[params]",
        params,
        "[tls]",
        'ca = "ca.pem"',
        "[leader]",
        'address = "127.0.0.1:1"',
        'certificate = "l.pem"',
        'key = "l.key"',
    ]
    for k in range(parties):
        lines += [
            "[[party]]",
            f'name = "p{k}"',
            f'address = "127.0.0.1:{k + 2}"',
            f'certificate = "p{k}.pem"',
            f'key = "p{k}.key"',
            'data = "breast_cancer"',
            f"columns = [{10 * k}, {10 * k + 10}]",
        ]
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_job(path)


BUDGET = "epsilon = 1.0\ndelta = 1e-5"


def test_secure_true_selects_the_secure_protocol_and_false_the_usual_one(tmp_path):
    spec = _job(tmp_path, f"secure = true\n{BUDGET}\niterations = 4")
    assert spec.protocol == "vertical_secure"
    assert spec.params["iterations"] == 4
    plain = _job(tmp_path, f'secure = false\nmechanism = "sound"\n{BUDGET}')
    assert plain.protocol == "vertical"
    three = _job(tmp_path, f"secure = true\n{BUDGET}", parties=3)
    assert three.protocol == "vertical_secure" and len(three.names) == 3


@pytest.mark.parametrize(
    ("params", "extra", "says"),
    [
        ("secure = true", {}, "needs [params].epsilon and [params].delta"),
        (f'secure = true\n{BUDGET}\nloss = "sigmoid"', {}, "loss"),
        (f'secure = true\n{BUDGET}\nmechanism = "paper"', {}, "mechanism"),
        (f"secure = true\n{BUDGET}\nrho = 1.0", {}, "rho"),
        (f"secure = true\n{BUDGET}", {"parties": 8}, "a label holder and 1 to 6 passive parties"),
        (f"secure = true\n{BUDGET}", {"job": 'evaluate = "full"'}, "test rows only"),
        (
            f"secure = true\n{BUDGET}\nlabel_holder_keeps_model = true",
            {},
            "needs protect_label_holder = true",
        ),
        (
            f"secure = true\n{BUDGET}\nprotect_label_holder = true\n"
            "label_holder_keeps_model = true",
            {"job": 'prediction_recipients = ["p0", "p1"]'},
            "predictions go to it ('p0') alone",
        ),
    ],
)
def test_what_the_secure_mode_does_not_take_is_refused_by_name(tmp_path, params, extra, says):
    with pytest.raises(DpfedInputError) as refused:
        _job(tmp_path, params, **extra)
    assert says in str(refused.value)
