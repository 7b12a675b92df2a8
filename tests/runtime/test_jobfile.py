"""The TOML job file: parsing, defaults, the shared digest and every refusal."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dpfed._validation import DpfedInputError
from dpfed.runtime.jobfile import LEADER, Budget, JobSpec, describe, load_job


# -- a tiny TOML writer (tomllib only reads) --------------------------------------------------
def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def _toml(doc: dict) -> str:
    lines: list[str] = []
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    arrays = {
        k: v
        for k, v in doc.items()
        if isinstance(v, list) and v and all(isinstance(t, dict) for t in v)
    }
    for k, v in doc.items():
        if k not in tables and k not in arrays:
            lines.append(f"{k} = {_value(v)}")
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {_value(v)}" for k, v in table.items()]
    for name, items in arrays.items():
        for table in items:
            lines.append(f"[[{name}]]")
            lines += [f"{k} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _party(name: str, port: int, columns: list[int], **extra) -> dict:
    return {
        "name": name,
        "address": f"127.0.0.1:{port}",
        "data": "a9a",
        "columns": columns,
        "certificate": f"certs/{name}.pem",
        "key": f"certs/{name}.key",
        **extra,
    }


def _doc() -> dict:
    return {
        "job": {"id": "a9a-demo", "protocol": "vertical", "round_timeout": 30.0, "grace": 5.0},
        "params": {
            "iterations": 20,
            "mechanism": "sound",
            "epsilon": 1.0,
            "delta": 1e-5,
            "lam": 1e-4,
            "tol": [1e-6, 1e-4],
            "adaptive_rho": False,
        },
        "tls": {"ca": "certs/ca.pem"},
        "leader": {
            "address": "127.0.0.1:50050",
            "certificate": "certs/leader.pem",
            "key": "certs/leader.key",
        },
        "party": [
            _party("label", 50051, [0, 40], budget={"epsilon": 4.0, "delta": 1e-5}),
            _party("bank", 50052, [40, 80], workdir="/srv/bank", data_dir="data"),
            _party("shop", 50053, [80, 123], ledger="ledgers/shop.sqlite", dataset="a9a-cols"),
        ],
    }


def _write(folder: Path, doc: dict | str, name: str = "job.toml") -> Path:
    path = folder / name
    path.write_text(doc if isinstance(doc, str) else _toml(doc))
    return path


def _load(folder: Path, doc: dict | str) -> JobSpec:
    return load_job(_write(folder, doc))


# -- a valid file ----------------------------------------------------------------------------
def test_evaluation_defaults_to_full_only_without_a_privacy_mechanism(tmp_path):
    doc = _doc()
    doc["params"] = {"iterations": 5}
    assert _load(tmp_path, doc).evaluate == "full"
    doc["params"] = {"iterations": 5, "mechanism": "paper", "epsilon": 1.0, "delta": 1e-5}
    assert _load(tmp_path, doc).evaluate == "test"


def test_valid_three_party_file_parses_with_defaults_and_resolved_paths(tmp_path):
    sub = tmp_path / "jobs"
    sub.mkdir()
    spec = _load(sub, _doc())
    base = sub.resolve()

    assert spec.id == "a9a-demo"
    assert spec.protocol == "vertical"
    assert spec.names == ["label", "bank", "shop"]
    assert spec.round_timeout == 30.0
    assert spec.grace == 5.0
    assert spec.idle_timeout == 3600.0
    assert spec.max_message_bytes == 64 * 2**20
    assert spec.evaluate == "test"  # a private job keeps exact training scores home
    assert spec.fsync is False
    assert spec.checkpoint == base / "checkpoint" / "a9a-demo"
    assert spec.ca == base / "certs" / "ca.pem"
    assert spec.params == {
        "iterations": 20,
        "mechanism": "sound",
        "epsilon": 1.0,
        "delta": 1e-5,
        "lam": 1e-4,
        "tol": [1e-6, 1e-4],
        "adaptive_rho": False,
    }

    assert spec.leader.name == LEADER
    assert spec.leader.address == "127.0.0.1:50050"
    assert spec.leader.certificate == base / "certs" / "leader.pem"
    assert spec.leader.key == base / "certs" / "leader.key"
    assert spec.endpoint(LEADER) is spec.leader

    label, bank, shop = spec.parties
    assert spec.party("bank") is bank
    assert spec.endpoint("shop") is shop
    assert label.certificate == base / "certs" / "label.pem"
    assert label.key == base / "certs" / "label.key"
    assert label.columns == (0, 40)
    assert label.n_features == 40
    assert label.data == "a9a"
    assert label.data_dir is None
    assert label.workdir == base / "work" / "label"
    assert label.ledger == base / "work" / "label" / "ledger.sqlite"
    assert label.dataset == "a9a[0:40]"
    assert label.budget == Budget(4.0, 1e-5)

    assert bank.workdir == Path("/srv/bank")  # absolute paths stay as they are
    assert bank.ledger == Path("/srv/bank/ledger.sqlite")
    assert bank.data_dir == base / "data"
    assert bank.dataset == "a9a[40:80]"
    assert bank.budget is None

    assert shop.ledger == base / "ledgers" / "shop.sqlite"
    assert shop.dataset == "a9a-cols"
    assert shop.n_features == 43

    view = describe(spec)
    assert view["digest"] == spec.digest
    assert [p["columns"] for p in view["parties"]] == [[0, 40], [40, 80], [80, 123]]


def test_job_options_are_read(tmp_path):
    doc = _doc()
    doc["job"] |= {
        "evaluate": "test",
        "idle_timeout": 7.5,
        "max_message_mb": 2,
        "fsync": True,
        "checkpoint": "ckpt",
    }
    spec = _load(tmp_path, doc)
    assert spec.evaluate == "test"
    assert spec.idle_timeout == 7.5
    assert spec.max_message_bytes == 2 * 2**20
    assert spec.fsync is True
    assert spec.checkpoint == tmp_path.resolve() / "ckpt"


def test_training_rows_are_not_predicted_unless_the_job_file_opts_in(tmp_path):
    assert _load(tmp_path, _doc()).predict_training_rows is False
    doc = _doc()
    doc["job"]["predict_training_rows"] = False
    off = tmp_path / "off"
    off.mkdir()
    # saying false is saying nothing: the digest of files without the key is unchanged
    assert _load(off, doc).digest == _load(tmp_path, _doc()).digest
    doc["job"]["predict_training_rows"] = True
    on = tmp_path / "on"
    on.mkdir()
    assert _load(on, doc).predict_training_rows is True


def test_two_parties_and_no_params_are_enough(tmp_path):
    doc = _doc()
    del doc["params"]
    doc["party"] = doc["party"][:2]
    spec = _load(tmp_path, doc)
    assert spec.params == {}
    assert spec.names == ["label", "bank"]


def test_unknown_party_is_refused_by_name(tmp_path):
    spec = _load(tmp_path, _doc())
    with pytest.raises(DpfedInputError, match="mallory"):
        spec.party("mallory")


# -- the digest ------------------------------------------------------------------------------
def test_digest_is_stable_and_ignores_local_paths(tmp_path):
    a = _load(tmp_path, _doc())
    assert a.digest == _load(tmp_path, _doc()).digest
    assert len(a.digest) == 64 and int(a.digest, 16) >= 0

    local = _doc()
    for p in local["party"]:
        p |= {
            "certificate": f"elsewhere/{p['name']}.crt",
            "key": f"elsewhere/{p['name']}.pem",
            "workdir": f"/tmp/other/{p['name']}",
            "data_dir": "/data/elsewhere",
            "ledger": "/var/ledger.sqlite",
            "budget": {"epsilon": 9.0, "delta": 1e-6},
        }
    local["leader"] |= {"certificate": "x.pem", "key": "x.key"}
    local["tls"]["ca"] = "other-ca.pem"
    local["job"] |= {"round_timeout": 99.0, "grace": 1.0, "checkpoint": "/var/ckpt"}
    b = tmp_path / "b"
    b.mkdir()
    assert _load(b, local).digest == a.digest


def _changed(mutate) -> dict:
    doc = _doc()
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d["params"].__setitem__("iterations", 21), id="params-value"),
        pytest.param(
            lambda d: d["params"].__setitem__("inner_iterations", 50), id="params-new-key"
        ),
        pytest.param(
            lambda d: (
                d["job"].__setitem__("simulation", True),
                d["params"].__setitem__("seed", 1),
            ),
            id="simulation",
        ),
        pytest.param(lambda d: d["params"].pop("tol"), id="params-removed-key"),
        pytest.param(lambda d: d["job"].__setitem__("id", "other"), id="job-id"),
        pytest.param(lambda d: d["job"].__setitem__("evaluate", "none"), id="evaluate"),
        pytest.param(
            lambda d: d["job"].__setitem__("predict_training_rows", True),
            id="predict-training-rows",
        ),
        pytest.param(lambda d: d["job"].__setitem__("max_message_mb", 8), id="max-message"),
        pytest.param(
            lambda d: d["leader"].__setitem__("address", "127.0.0.1:50060"), id="leader-address"
        ),
        pytest.param(
            lambda d: d["party"][1].__setitem__("address", "127.0.0.1:50062"), id="party-address"
        ),
        pytest.param(lambda d: d["party"][2].__setitem__("columns", [80, 122]), id="columns"),
        pytest.param(lambda d: d["party"][1].__setitem__("name", "bank2"), id="party-name"),
        pytest.param(lambda d: d["party"].reverse(), id="party-order"),
    ],
)
def test_digest_changes_with_what_parties_must_agree_on(tmp_path, mutate):
    base = _load(tmp_path, _doc()).digest
    other = tmp_path / "other"
    other.mkdir()
    assert _load(other, _changed(mutate)).digest != base


# -- refusals --------------------------------------------------------------------------------
def test_missing_file_is_refused(tmp_path):
    with pytest.raises(DpfedInputError, match="does not exist"):
        load_job(tmp_path / "nope.toml")


@pytest.mark.parametrize("text", ["[job\nid = 1\n", "id = \n", "a = 1\na = 2\n"])
def test_invalid_toml_is_refused(tmp_path, text):
    with pytest.raises(DpfedInputError, match="not valid TOML"):
        _load(tmp_path, text)


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "job.toml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DpfedInputError, match="not valid TOML"):
        load_job(path)


def _refused(tmp_path, doc, *patterns):
    with pytest.raises(DpfedInputError) as info:
        _load(tmp_path, doc)
    for pattern in patterns:
        assert pattern in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("where", "key"),
    [
        (None, "extra"),
        ("job", "timeout"),
        ("params", "epsilon_total"),
        ("tls", "crl"),
        ("leader", "data"),
    ],
)
def test_unknown_keys_are_refused_by_name(tmp_path, where, key):
    doc = _doc()
    (doc if where is None else doc[where])[key] = 1
    _refused(tmp_path, doc, "unknown keys", repr(key))


def test_unknown_party_key_is_refused_by_name(tmp_path):
    doc = _doc()
    doc["party"][1]["port"] = 1
    _refused(tmp_path, doc, "[[party]] #2", "unknown keys", "'port'")


@pytest.mark.parametrize("table", ["job", "tls", "leader"])
def test_missing_tables_are_refused(tmp_path, table):
    doc = _doc()
    del doc[table]
    _refused(tmp_path, doc, f"[{table}]")


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        ("protocol", "horizontal", "[job].protocol"),
        ("protocol", "", "[job].protocol"),
        ("evaluate", "partial", "[job].evaluate"),
        ("evaluate", 1, "[job].evaluate"),
        ("id", "a/b", "[job].id"),
        ("id", "", "[job].id"),
        ("fsync", "yes", "[job].fsync"),
        ("round_timeout", -1.0, "[job].round_timeout"),
        ("round_timeout", 0, "[job].round_timeout"),
        ("round_timeout", math.inf, "[job].round_timeout"),
        ("grace", -0.5, "[job].grace"),
        ("idle_timeout", -3, "[job].idle_timeout"),
        ("max_message_mb", -1, "[job].max_message_mb"),
        ("max_message_mb", 1e-6, "[job].max_message_mb"),
        ("checkpoint", "", "[job].checkpoint"),
        ("prediction_recipients", ["mallory"], "[job].prediction_recipients"),
        ("prediction_recipients", [], "[job].prediction_recipients"),
        ("prediction_recipients", "leader", "[job].prediction_recipients"),
        ("predict_training_rows", "yes", "[job].predict_training_rows"),
        ("predict_training_rows", 1, "[job].predict_training_rows"),
    ],
)
def test_bad_job_values_are_refused_by_key(tmp_path, key, value, pattern):
    doc = _doc()
    doc["job"][key] = value
    _refused(tmp_path, doc, pattern)


def test_missing_protocol_is_refused(tmp_path):
    doc = _doc()
    del doc["job"]["protocol"]
    _refused(tmp_path, doc, "[job].protocol")


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_parties_are_refused(tmp_path, n):
    doc = _doc()
    doc["party"] = doc["party"][:n]
    if not n:
        del doc["party"]
    _refused(tmp_path, doc, "at least two [[party]]")


def test_party_that_is_not_a_table_is_refused(tmp_path):
    doc = _doc()
    del doc["party"]
    doc["party"] = [1, 2]
    _refused(tmp_path, doc, "[[party]] #1 must be a table")


def test_duplicate_party_names_are_refused(tmp_path):
    doc = _doc()
    doc["party"][2]["name"] = "bank"
    _refused(tmp_path, doc, "distinct", "bank")


def test_the_leader_name_is_reserved(tmp_path):
    doc = _doc()
    doc["party"][1]["name"] = "leader"
    _refused(tmp_path, doc, "reserved", "'leader'")


@pytest.mark.parametrize("name", ["a b", "bank/1", "x" * 65, "bänk", "", 7])
def test_bad_party_names_are_refused(tmp_path, name):
    doc = _doc()
    doc["party"][1]["name"] = name
    _refused(tmp_path, doc, "[[party]] #2.name")


def test_duplicate_addresses_are_refused(tmp_path):
    doc = _doc()
    doc["party"][2]["address"] = doc["party"][0]["address"]
    _refused(tmp_path, doc, "own address", "127.0.0.1:50051")
    doc = _doc()
    doc["party"][1]["address"] = doc["leader"]["address"]
    _refused(tmp_path, doc, "own address", "127.0.0.1:50050")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "host:port",
        ":50051",
        "a b:1",
        "::1:50051",
        "127.0.0.1:123456",
    ],
)
def test_bad_party_address_is_refused(tmp_path, address):
    doc = _doc()
    doc["party"][1]["address"] = address
    _refused(tmp_path, doc, "party 'bank'.address", repr(address))


@pytest.mark.parametrize("address", ["[::1]:50059", "localhost:1", "node-2.example.org:65535"])
def test_good_addresses_are_accepted(tmp_path, address):
    doc = _doc()
    doc["party"][1]["address"] = address
    assert _load(tmp_path, doc).party("bank").address == address


def test_bad_leader_address_is_refused(tmp_path):
    doc = _doc()
    doc["leader"]["address"] = "localhost"
    _refused(tmp_path, doc, "[leader].address")


@pytest.mark.parametrize(
    "columns", [[5, 5], [-1, 3], [1], ["a", 2], [6, 2], [0, 1, 2], [True, 3], [0.0, 3], 3]
)
def test_bad_columns_are_refused(tmp_path, columns):
    doc = _doc()
    doc["party"][1]["columns"] = columns
    _refused(tmp_path, doc, "party 'bank'.columns")


def test_missing_columns_are_refused(tmp_path):
    doc = _doc()
    del doc["party"][1]["columns"]
    _refused(tmp_path, doc, "party 'bank'.columns")


@pytest.mark.parametrize("key", ["address", "certificate", "key", "data"])
def test_missing_party_strings_are_refused(tmp_path, key):
    doc = _doc()
    del doc["party"][2][key]
    _refused(tmp_path, doc, f"party 'shop'.{key}")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("iterations", "ten"),
        ("iterations", 10.0),
        ("iterations", True),
        ("lam", True),
        ("lam", "0.1"),
        ("epsilon", [1.0]),
        ("mechanism", 3),
        ("adaptive_rho", 1),
        ("protect_label_holder", "yes"),
        ("tol", 1e-3),
    ],
)
def test_params_of_the_wrong_type_are_refused(tmp_path, key, value):
    doc = _doc()
    doc["params"][key] = value
    _refused(tmp_path, doc, f"[params].{key}", repr(value))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("key", ["lam", "epsilon", "rho"])
def test_non_finite_params_are_refused(tmp_path, key, value):
    doc = _doc()
    doc["params"][key] = value
    _refused(tmp_path, doc, f"[params].{key} must be finite")


def test_integer_params_are_accepted_where_floats_are(tmp_path):
    doc = _doc()
    doc["params"] |= {"lam": 0, "epsilon": 2, "tol": [0, 1]}
    spec = _load(tmp_path, doc)
    assert spec.params["epsilon"] == 2
    assert spec.params["tol"] == [0.0, 1.0]
    assert all(type(v) is float for v in spec.params["tol"])


@pytest.mark.parametrize("tol", [[], [1e-3], [1e-3, 1e-3, 1e-3], ["a", 1e-3]])
def test_tol_must_be_a_pair_of_numbers(tmp_path, tol):
    doc = _doc()
    doc["params"]["tol"] = tol
    _refused(tmp_path, doc, "[params].tol must be [abs, rel]")


@pytest.mark.parametrize(
    "tol", [[math.nan, 0.1], [1e-3, math.inf], [-math.inf, 0.1], [True, 0.1], [1e-3, False]]
)
def test_non_finite_or_boolean_tol_is_refused(tmp_path, tol):
    doc = _doc()
    doc["params"]["tol"] = tol
    _refused(tmp_path, doc, "[params].tol must be [abs, rel]")


@pytest.mark.parametrize("value", [3, "x", [1, 2]])
def test_params_that_is_not_a_table_is_refused(tmp_path, value):
    doc = _doc()
    del doc["params"]
    doc["params"] = value
    _refused(tmp_path, doc, "[params] must be a table")


@pytest.mark.parametrize(
    ("budget", "pattern"),
    [
        (3, "party 'label'.budget must be"),
        ({"epsilon": 1.0}, "party 'label'.budget must be"),
        ({"epsilon": 1.0, "delta": 1e-5, "rounds": 3}, "party 'label'.budget must be"),
        ({"epsilon": 0.0, "delta": 1e-5}, "party 'label'.budget.epsilon"),
        ({"epsilon": -1.0, "delta": 1e-5}, "party 'label'.budget.epsilon"),
        ({"epsilon": math.inf, "delta": 1e-5}, "party 'label'.budget.epsilon"),
        ({"epsilon": 1.0, "delta": 0.0}, "party 'label'.budget.delta"),
        ({"epsilon": 1.0, "delta": 1.0}, "party 'label'.budget.delta"),
        ({"epsilon": 1.0, "delta": 1.5}, "party 'label'.budget.delta"),
        ({"epsilon": 1.0, "delta": -1e-5}, "party 'label'.budget.delta"),
        ({"epsilon": 1.0, "delta": math.nan}, "party 'label'.budget.delta"),
    ],
)
def test_bad_budgets_are_refused(tmp_path, budget, pattern):
    doc = _doc()
    doc["party"][0]["budget"] = budget
    _refused(tmp_path, doc, pattern)


def test_listen_address_is_local_and_outside_the_digest(tmp_path):
    doc = _doc()
    plain = _load(tmp_path, doc)
    doc["party"][1]["listen"] = "0.0.0.0:18052"
    doc["leader"]["listen"] = "0.0.0.0:18050"
    spec = _load(tmp_path, doc)
    assert spec.party(spec.names[1]).bind == "0.0.0.0:18052"
    assert spec.leader.bind == "0.0.0.0:18050"
    assert spec.party(spec.names[0]).bind == spec.party(spec.names[0]).address
    assert spec.digest == plain.digest
    doc["party"][1]["listen"] = "no-port"
    with pytest.raises(DpfedInputError, match="listen must be host:port"):
        _load(tmp_path, doc)


# -- secure sum --------------------------------------------------------------------------------
def _secure_sum_doc(roles: list[str]) -> dict:
    doc = _doc()
    doc["job"]["protocol"] = "secure_sum"
    doc["params"] = {"dim": 3, "mechanism": "gaussian", "noise_std": 1.0, "tolerated": 0}
    parties = []
    for k, role in enumerate(roles):
        p = _party(f"p{k}", 50060 + k, [0, 1])
        del p["columns"]
        if role:
            p["role"] = role
            del p["data"]  # a compute node holds no data
        else:
            p["rows"] = [k, k + 1]
        parties.append(p)
    doc["party"] = parties
    return doc


def test_secure_sum_job_has_compute_nodes_and_clients(tmp_path):
    spec = _load(tmp_path, _secure_sum_doc(["compute", "compute", "", ""]))
    assert [p.role for p in spec.parties] == ["compute", "compute", "", ""]
    assert spec.parties[2].rows == (2, 3) and spec.parties[0].rows is None
    assert spec.params["dim"] == 3


@pytest.mark.parametrize(
    ("roles", "pattern"),
    [
        (["", ""], 'role = "compute"'),
        (["compute", "compute"], "one client"),
        (["server", ""], "may only be"),
    ],
)
def test_secure_sum_roles_are_checked(tmp_path, roles, pattern):
    _refused(tmp_path, _secure_sum_doc(roles), pattern)


def test_a_compute_role_outside_a_secure_sum_is_refused(tmp_path):
    doc = _doc()
    doc["party"][1]["role"] = "compute"
    _refused(tmp_path, doc, "may only be", "compute")


# -- noise: a seed only in a declared simulation ---------------------------------------------
def test_a_seed_is_refused_outside_a_simulation(tmp_path):
    doc = _doc()
    doc["params"]["seed"] = 3
    with pytest.raises(DpfedInputError, match=r"\[params\]\.seed = 3 .*simulation = true"):
        _load(tmp_path, doc)


def test_a_simulation_needs_a_seed_and_a_boolean(tmp_path):
    doc = _doc()
    doc["job"]["simulation"] = True
    with pytest.raises(DpfedInputError, match=r"needs \[params\]\.seed"):
        _load(tmp_path, doc)
    doc["job"]["simulation"] = "yes"
    doc["params"]["seed"] = 3
    with pytest.raises(DpfedInputError, match="simulation must be true or false"):
        _load(tmp_path, doc)


def test_a_declared_simulation_keeps_its_seed(tmp_path):
    doc = _doc()
    doc["job"]["simulation"] = True
    doc["params"]["seed"] = 3
    spec = _load(tmp_path, doc)
    assert spec.simulation and spec.params["seed"] == 3
    assert describe(spec)["simulation"] is True
    assert not _load(tmp_path, _doc()).simulation


def test_a_seed_of_the_wrong_type_is_refused_in_a_simulation(tmp_path):
    doc = _doc()
    doc["job"]["simulation"] = True
    doc["params"]["seed"] = 1.5
    _refused(tmp_path, doc, "[params].seed", "1.5")


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"mechanism": "sound", "epsilon": 1.0, "delta": None}, "needs delta"),
        (
            {"mechanism": "none", "noise_multiplier": 2.0, "epsilon": None, "delta": None},
            "need a privacy mechanism",
        ),
    ],
)
def test_params_a_protocol_cannot_run_are_refused_when_the_file_is_read(tmp_path, params, pattern):
    """What a party's host would refuse, every process refuses on reading the file: the
    leader never waits on parties for a job none of them can run."""
    doc = _doc()
    doc["params"] = {k: v for k, v in (doc["params"] | params).items() if v is not None}
    _refused(tmp_path, doc, pattern)
