"""``dpfed train``: one subcommand per protocol, its options generated from the protocol's
configuration (:func:`dpfed.parameters.add_config_arguments`)."""

from __future__ import annotations

import argparse

from dpfed.cli.bayes import add_train_bayes_linreg
from dpfed.cli.horizontal import add_train_consensus, add_train_decentralized
from dpfed.cli.vertical import add_train_vertical

#: The ``dpfed train`` subcommands, in the order ``--help`` lists them.
TRAIN_COMMANDS = (
    add_train_vertical,
    add_train_consensus,
    add_train_decentralized,
    add_train_bayes_linreg,
)


def configure_train(p: argparse.ArgumentParser) -> None:
    """``dpfed train``: its protocol subcommands."""
    tsub = p.add_subparsers(dest="protocol", required=True)
    for add in TRAIN_COMMANDS:
        add(tsub)
