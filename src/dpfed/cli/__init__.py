"""The ``dpfed`` command line: one module per command, shared helpers in
:mod:`dpfed.cli.common`, the entry point in :mod:`dpfed.cli.main`."""

from dpfed.cli.main import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
