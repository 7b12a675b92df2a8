"""The runtime's logging: formats, levels, and gRPC kept quiet."""

import json
import logging

import pytest

from dpfed import DpfedInputError
from dpfed.runtime.logs import configure_logging, process_logger, quiet_grpc


@pytest.fixture
def restore_logging():
    yield
    configure_logging()  # back to the default for the other tests


def test_text_lines_name_the_process(capsys, restore_logging):
    configure_logging("info", "text")
    process_logger("dpfed.runtime.party", "bank").info("serving job j")
    assert capsys.readouterr().err == "[bank] serving job j\n"


def test_json_lines_are_one_object_each(capsys, restore_logging):
    configure_logging("info", "json")
    log = process_logger("dpfed.runtime.party", "bank")
    log.warning("refused a message from mallory: not a party")
    log.info("round 3")
    lines = capsys.readouterr().err.splitlines()
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "warning" and first["party"] == "bank"
    assert first["logger"] == "dpfed.runtime.party"
    assert first["message"] == "refused a message from mallory: not a party"
    assert second["message"] == "round 3" and first["time"] <= second["time"]


def test_the_level_hides_less_severe_lines(capsys, restore_logging):
    configure_logging("warning", "text")
    log = process_logger("dpfed.runtime.leader", "leader")
    log.info("round 1: ...")
    log.warning("waiting for shop")
    assert capsys.readouterr().err == "[leader] waiting for shop\n"
    assert not logging.getLogger("dpfed").propagate


@pytest.mark.parametrize(("level", "fmt"), [("loud", "text"), ("info", "xml")])
def test_bad_options_are_refused_by_name(level, fmt):
    with pytest.raises(DpfedInputError, match=r"log (level|format) must be one of"):
        configure_logging(level, fmt)


def test_grpc_is_quiet_unless_the_user_says_otherwise(monkeypatch):
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    quiet_grpc()
    import os

    assert os.environ["GRPC_VERBOSITY"] == "ERROR"
    monkeypatch.setenv("GRPC_VERBOSITY", "DEBUG")
    quiet_grpc()
    assert os.environ["GRPC_VERBOSITY"] == "DEBUG"
