"""``dpfed train``: one subcommand per protocol, its options generated from the protocol's
configuration (:func:`dpfed.parameters.add_config_arguments`).

A registered protocol that declares its in-process training
(:attr:`dpfed.protocols.base.BaseProtocol.training`) gets its command generated whole
(:func:`add_generated_train`); the vertical, decentralized and Bayesian commands are written
out because they take options of their own (column splits and baselines, graphs, the secure
sum's settings).
"""

from __future__ import annotations

import argparse
from typing import Any

from dpfed._io import write_json_atomic
from dpfed.cli.bayes import add_train_bayes_linreg
from dpfed.cli.common import add_engine_arguments, engine_from_args, print_result
from dpfed.cli.decentralized import add_train_decentralized
from dpfed.cli.row_data import add_row_data_arguments, load_parts, row_preprocessing
from dpfed.cli.vertical import add_train_vertical
from dpfed.parameters import add_config_arguments, config_kwargs, parse_int
from dpfed.protocols.base import Training, trainings


def configure_train(p: argparse.ArgumentParser) -> None:
    """``dpfed train``: its protocol subcommands (``--help`` lists the vertical one, the
    generated ones in registry order, then the decentralized and Bayesian ones)."""
    tsub = p.add_subparsers(dest="protocol", required=True)
    add_train_vertical(tsub)
    for name, training in trainings().items():
        add_generated_train(tsub, name, training)
    add_train_decentralized(tsub)
    add_train_bayes_linreg(tsub)


def add_generated_train(sub: Any, name: str, training: Training) -> argparse.ArgumentParser:
    """Register ``dpfed train <name>`` on the ``train`` subparsers ``sub``, generated from the
    protocol's in-process ``training``: the row data options
    (:func:`~dpfed.cli.row_data.add_row_data_arguments`), ``--<parties>`` (how many parts the
    rows are cut into), one option per configuration field (with the training's defaults) and
    the engine options. It writes the result JSON and prints its summary."""
    p = sub.add_parser(name, help=training.summary, description=training.description)
    add_row_data_arguments(p)
    p.add_argument(
        f"--{training.parties}",
        type=parse_int,
        required=True,
        help=f"how many {training.parties} the rows are cut into",
    )
    add_config_arguments(p, training.config, defaults=dict(training.defaults))
    add_engine_arguments(p)
    p.set_defaults(func=lambda args: run_generated_train(args, training))
    return p


def run_generated_train(args: argparse.Namespace, training: Training) -> int:
    """Run a generated ``dpfed train`` command: validate the configuration, cut the rows,
    train, write ``--out`` atomically and print the summary."""
    config = training.config(**config_kwargs(training.config, args)).validated()
    data, parts, X_test = load_parts(args, getattr(args, training.parties))
    result = training.train(
        parts,
        config,
        X_test=X_test,
        y_test=data.y_test,
        progress=not args.quiet,
        engine=engine_from_args(args),
    )
    payload = result.to_json() | {"data": data.name, "preprocessing": row_preprocessing(data)}
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0
