"""``dpfed train decentralized``: sample-partitioned learning over a graph.

The protocol options are generated from
:class:`~dpfed.protocols.decentralized.driver.DecentralizedConfig`; the data options are those
of every row protocol (:mod:`dpfed.cli.row_data`) and the graph options the command's own.
(``dpfed train consensus`` is generated whole from its protocol's in-process training:
:func:`dpfed.cli.train.add_generated_train`.)
"""

from __future__ import annotations

import argparse
from typing import Any

from dpfed._io import write_json_atomic
from dpfed.cli.common import add_engine_arguments, engine_from_args, print_result
from dpfed.cli.row_data import add_row_data_arguments, load_parts, row_preprocessing
from dpfed.core import get_loss
from dpfed.data import make_graph
from dpfed.parameters import add_config_arguments, config_kwargs, parse_float, parse_int
from dpfed.protocols.decentralized.driver import (
    DecentralizedConfig,
    centralized_optimum,
    joint_objective,
    train_decentralized,
)


def add_train_decentralized(sub: Any) -> None:
    """Register ``dpfed train decentralized`` on the ``train`` subparsers ``sub``."""
    p = sub.add_parser(
        "decentralized",
        help="decentralized learning over a graph: ADMM with DVP or PVP",
        description="Nodes hold different rows and talk to their graph neighbours only.",
    )
    add_row_data_arguments(p)
    p.add_argument("--nodes", type=parse_int, required=True)
    p.add_argument(
        "--graph",
        default="ring",
        choices=["ring", "grid", "complete", "erdos-renyi", "geometric"],
    )
    p.add_argument("--p", type=parse_float, help="edge probability (erdos-renyi)")
    p.add_argument("--radius", type=parse_float, help="connection radius (geometric)")
    p.add_argument("--graph-seed", type=parse_int, default=0)
    p.add_argument(
        "--central",
        action="store_true",
        help="also solve the same objective on every node's rows in one place and report "
        "the final model's relative gap to it (a simulation's check; it needs the rows)",
    )
    paper = "default: the paper's per perturbation (rho, C^R, eta): " + ", ".join(
        f"{k} ({v[0]:g}, {v[1]:g}, {v[2]:g})" for k, v in PAPER_SETTINGS.items()
    )
    add_config_arguments(
        p,
        DecentralizedConfig,
        notes=dict.fromkeys(("rho", "loss_scale", "eta"), paper),
    )
    add_engine_arguments(p)
    p.set_defaults(func=run_train_decentralized)


#: The paper's (rho, C^R) per scheme (paper 001, section VI) and an ADMM penalty eta (the
#: paper gives none): small eta converges fastest without noise and gives PVP its lowest
#: training objective; DVP's dual noise needs a larger eta to damp it (the eta sweep of
#: ``dpfed reproduce decentralized`` on Adult, 10 nodes on a ring).
PAPER_SETTINGS = {
    "none": (1e-10, 1750.0, 0.03),
    "dvp": (10**-2.5, 1750.0, 3.0),
    "pvp": (1e-1, 146.0, 0.03),
}


def central_reference(parts, config: DecentralizedConfig, final: dict) -> dict:
    r"""The centralised optimum :math:`f^\star` of the nodes' joint objective :math:`J` (rows
    as the nodes train on them: clipped to norm 1, with the intercept column) and the final
    round's relative gap :math:`(J(\bar f) - J(f^\star)) / |J(f^\star)|`."""
    loss = get_loss(config.loss)
    rows = [(config.prepare_rows(X), y) for X, y in parts]  # as the nodes train on them
    f = centralized_optimum(rows, loss=loss, loss_scale=config.loss_scale, rho=config.rho)
    best = joint_objective(f, rows, loss=loss, loss_scale=config.loss_scale, rho=config.rho)
    reached = final.get("train_objective")
    return {
        "objective": best,
        "relative_gap": None if reached is None else (float(reached) - best) / abs(best),
    }


def run_train_decentralized(args: argparse.Namespace) -> int:
    given = config_kwargs(DecentralizedConfig, args)
    rho, scale, eta = PAPER_SETTINGS[given.get("perturbation", "none")]
    given = {"rho": rho, "loss_scale": scale, "eta": eta} | given
    config = DecentralizedConfig(**given).validated()
    graph = make_graph(args.graph, args.nodes, rng=args.graph_seed, p=args.p, radius=args.radius)
    data, parts, X_test = load_parts(args, args.nodes)
    result = train_decentralized(
        parts, graph, config, X_test=X_test, y_test=data.y_test, engine=engine_from_args(args)
    )
    payload = result.to_json() | {"data": data.name, "preprocessing": row_preprocessing(data)}
    if args.central:
        payload["central"] = central_reference(parts, config, payload["final"])
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    final = payload["final"]
    if final.get("misclassification_rate") is not None:
        print(f"misclassification rate: {final['misclassification_rate']:.4f}")
    if args.central and payload["central"]["relative_gap"] is not None:
        print(
            f"relative gap to the centralised objective: {payload['central']['relative_gap']:.3g}"
        )
    return 0
