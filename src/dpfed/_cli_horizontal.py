"""``dpfed train consensus`` and ``dpfed train decentralized``: sample-partitioned learning."""

from __future__ import annotations

from dpfed._cli_common import parse_float, parse_int, print_result
from dpfed._validation import DpfedInputError


def parse_float_list(text: str) -> tuple[float, ...]:
    """``"0.5,1,1"`` as numbers (argparse reports a malformed list against the option)."""
    return tuple(parse_float(v) for v in text.split(",") if v.strip())


def _add_data(p) -> None:
    p.add_argument("--data", required=True, help="data set name (adult, a9a, ...) or LIBSVM file")
    p.add_argument("--test", help="LIBSVM test file (with a file given to --data)")
    p.add_argument("--data-dir", help="folder of named data sets (default: $DPFED_DATA)")
    p.add_argument(
        "--uneven", type=parse_float,
        help="Dirichlet concentration for uneven part sizes (default: even sizes)",
    )
    p.add_argument("--split-seed", type=parse_int, default=0, help="seed of the row partition")
    p.add_argument("--iterations", type=parse_int, required=True)
    p.add_argument("--seed", type=parse_int, help="seed of the noise")
    p.add_argument("--out", required=True, help="result JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _parts(args, count: int):
    """The data set, its rows cut into ``count`` parts, and the test rows."""
    import os

    from dpfed.core.rows import normalize_rows
    from dpfed.data import horizontal_split, load_dataset

    if args.test and not os.path.isfile(args.data):
        raise DpfedInputError(
            f"--test goes with a LIBSVM file given to --data. Found --data {args.data!r}."
        )
    data = load_dataset(args.data, args.data_dir, test=args.test)
    # rows of norm 1: the sensitivity bounds of both protocols assume norm <= 1
    X = normalize_rows(data.X_train)
    X_test = normalize_rows(data.X_test) if data.X_test is not None else None
    index = horizontal_split(X.shape[0], count, uneven=args.uneven, rng=args.split_seed)
    return data, [(X[i], data.y_train[i]) for i in index], X_test


def _preprocessing(data) -> dict:
    """The data set's preprocessing, then the row normalisation of :func:`_parts`."""
    from dpfed.data.specs import ROW_NOTE

    return data.preprocessing | {"before_training": ROW_NOTE}


def add_train_consensus(sub) -> None:
    p = sub.add_parser(
        "consensus",
        help="horizontally partitioned learning with a server: (DP) consensus ADMM",
        description="Clients hold different rows; a server averages their noisy local models.",
    )
    _add_data(p)
    p.add_argument("--clients", type=parse_int, required=True)
    p.add_argument("--mechanism", default="none", choices=["none", "gaussian"])
    p.add_argument("--epsilon", type=parse_float, help="target total epsilon of every client")
    p.add_argument("--delta", type=parse_float)
    p.add_argument("--noise-multiplier", type=parse_float, help="instead of --epsilon")
    p.add_argument("--accountant", default="pld", choices=["pld", "rdp", "moments"])
    p.add_argument("--lam", type=parse_float, default=1e-5, help="regulariser weight (eq. 1a)")
    p.add_argument("--rho", type=parse_float, default=0.015, help="ADMM penalty")
    p.set_defaults(func=_cmd_train_consensus)


def _cmd_train_consensus(args) -> int:
    from dpfed._io import write_json_atomic
    from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus

    config = ConsensusConfig(
        lam=args.lam, rho=args.rho, iterations=args.iterations, mechanism=args.mechanism,
        epsilon=args.epsilon, delta=args.delta, noise_multiplier=args.noise_multiplier,
        accountant=args.accountant, seed=args.seed,
    ).validated()
    data, parts, X_test = _parts(args, args.clients)
    result = train_consensus(
        parts, config, X_test=X_test, y_test=data.y_test, progress=not args.quiet
    )
    payload = result.to_json() | {"data": data.name, "preprocessing": _preprocessing(data)}
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    return 0


def add_train_decentralized(sub) -> None:
    p = sub.add_parser(
        "decentralized",
        help="decentralized learning over a graph: ADMM with DVP or PVP",
        description="Nodes hold different rows and talk to their graph neighbours only.",
    )
    _add_data(p)
    p.add_argument("--nodes", type=parse_int, required=True)
    p.add_argument(
        "--graph", default="ring",
        choices=["ring", "grid", "complete", "erdos-renyi", "geometric"],
    )
    p.add_argument("--p", type=parse_float, help="edge probability (erdos-renyi)")
    p.add_argument("--radius", type=parse_float, help="connection radius (geometric)")
    p.add_argument("--graph-seed", type=parse_int, default=0)
    p.add_argument("--perturbation", default="none", choices=["none", "dvp", "pvp"])
    p.add_argument("--alpha", type=parse_float, help="per-round privacy of every broadcast")
    p.add_argument(
        "--node-alphas", type=parse_float_list, metavar="A1,A2,...",
        help="instead of --alpha: one per-round privacy per node (nodes in graph order)",
    )
    p.add_argument("--schedule", default="constant", choices=["constant", "geometric", "linear"])
    p.add_argument("--rate", type=parse_float, help="ratio of the geometric schedule")
    p.add_argument("--delta", type=parse_float, help="also bound the total by advanced composition")
    p.add_argument("--loss-scale", type=parse_float, help="C^R (default: the paper's per scheme)")
    p.add_argument("--rho", type=parse_float, help="regulariser weight (default: the paper's)")
    p.add_argument(
        "--eta", type=parse_float,
        help="ADMM penalty (default 0.03 without perturbation and with PVP, 3 with DVP)",
    )
    p.set_defaults(func=_cmd_train_decentralized)


#: The paper's (rho, C^R) per scheme (paper 001, section VI) and an ADMM penalty eta (the
#: paper gives none): small eta converges fastest without noise and gives PVP its lowest
#: training objective; DVP's dual noise needs a larger eta to damp it (the eta sweep of
#: ``dpfed reproduce decentralized`` on Adult, 10 nodes on a ring).
PAPER_SETTINGS = {
    "none": (1e-10, 1750.0, 0.03),
    "dvp": (10 ** -2.5, 1750.0, 3.0),
    "pvp": (1e-1, 146.0, 0.03),
}


def _cmd_train_decentralized(args) -> int:
    from dpfed._io import write_json_atomic
    from dpfed.data import make_graph
    from dpfed.protocols.decentralized.driver import DecentralizedConfig, train_decentralized

    rho, scale, eta = PAPER_SETTINGS[args.perturbation]
    config = DecentralizedConfig(
        loss_scale=args.loss_scale if args.loss_scale is not None else scale,
        rho=args.rho if args.rho is not None else rho,
        eta=args.eta if args.eta is not None else eta,
        iterations=args.iterations, perturbation=args.perturbation, alpha=args.alpha,
        node_alphas=args.node_alphas, schedule=args.schedule, rate=args.rate, delta=args.delta,
        seed=args.seed,
    ).validated()
    graph = make_graph(args.graph, args.nodes, rng=args.graph_seed, p=args.p, radius=args.radius)
    data, parts, X_test = _parts(args, args.nodes)
    result = train_decentralized(parts, graph, config, X_test=X_test, y_test=data.y_test)
    payload = result.to_json() | {"data": data.name, "preprocessing": _preprocessing(data)}
    write_json_atomic(args.out, payload)
    print_result(payload, args.out)
    final = payload["final"]
    if final.get("misclassification_rate") is not None:
        print(f"misclassification rate: {final['misclassification_rate']:.4f}")
    return 0
