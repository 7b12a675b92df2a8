"""Digests of seeded results, to check that a refactoring changes no result.

Runs a fixed list of seeded ``dpfed`` commands (every protocol, every mechanism, the quick
reproductions), drops the fields that are measured rather than computed (seconds, timings,
paths, versions), and prints one SHA-256 per command as JSON::

    DPFED_DATA=../shared/data python tools/result_digests.py > before.json
    # ... change the code ...
    DPFED_DATA=../shared/data python tools/result_digests.py > after.json
    diff before.json after.json

Each command runs in a fresh process with one BLAS thread, so the figures are bit-identical
between runs on one machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: name -> arguments of ``dpfed`` (``{out}`` is the output file or folder; a command without
#: one prints its JSON).
COMMANDS: dict[str, list[str]] = {
    "demo": "demo --seed 0 --out {out}".split(),
    "vertical-none": (
        "train vertical --data breast_cancer --split 10,10,10 --iterations 15 "
        "--seed 0 --quiet --out {out}"
    ).split(),
    "vertical-sound": (
        "train vertical --data a9a --split 66,57 --iterations 10 "
        "--rounds-above-rule --mechanism sound --epsilon 4 --delta 1e-5 --seed "
        "1 --baselines --quiet --out {out}"
    ).split(),
    "vertical-sound-protected": (
        "train vertical --data breast_cancer --split 10,10,10 --iterations 8 "
        "--rounds-above-rule --mechanism sound --epsilon 2 --delta 1e-5 "
        "--protect-label-holder --seed 2 --quiet --out {out}"
    ).split(),
    "vertical-paper": (
        "train vertical --data breast_cancer --split 10,10,10 --iterations 8 "
        "--mechanism paper --epsilon 1 --delta 1e-5 --seed 3 --quiet --out "
        "{out}"
    ).split(),
    "consensus-none": (
        "train consensus --data adult --clients 5 --iterations 8 --seed 0 --quiet --out {out}"
    ).split(),
    "consensus-gaussian": (
        "train consensus --data adult --clients 5 --iterations 8 --mechanism "
        "gaussian --epsilon 1 --delta 1e-5 --seed 4 --quiet --out {out}"
    ).split(),
    "decentralized-dvp": (
        "train decentralized --data adult --nodes 6 --graph ring --iterations "
        "10 --perturbation dvp --alpha 0.5 --seed 5 --quiet --out {out}"
    ).split(),
    "decentralized-pvp": (
        "train decentralized --data adult --nodes 6 --graph erdos-renyi --p 0.5 "
        "--iterations 10 --perturbation pvp --alpha 0.5 --delta 1e-5 --seed 6 "
        "--quiet --out {out}"
    ).split(),
    "bayes-distributed": (
        "train bayes-linreg --data wine-red --epsilon 1 --delta 1e-4 "
        "--projection --runs 3 --seed 7 --quiet --out {out}"
    ).split(),
    "bayes-trusted": (
        "train bayes-linreg --data abalone --mode trusted --epsilon 2 --delta "
        "1e-4 --runs 2 --seed 8 --quiet --out {out}"
    ).split(),
    "privacy-epsilon": (
        "privacy epsilon --noise-multiplier 2.0 --steps 20 --delta 1e-5 --json"
    ).split(),
    "reproduce-consensus": "reproduce consensus --quick --quiet --out {out}".split(),
    "reproduce-bayes": "reproduce bayes-linreg --quick --quiet --out {out}".split(),
}

#: Keys whose values are measured (time, environment), not computed from the seed.
VOLATILE = {
    "seconds",
    "elapsed",
    "elapsed_seconds",
    "timing",
    "timings",
    "wall_seconds",
    "version",
    "dpfed_version",
    "created",
    "started",
    "finished",
    "path",
    "data_dir",
    "out",
    "out_dir",
    "command",
    "python",
    "platform",
    "per_iteration_seconds",
    "runtime",
    "accounting_seconds",
    "fit_seconds",
    "seconds_per_round",
}


#: Commands whose results carry CKKS's approximate arithmetic (SEAL draws each encryption's
#: randomness itself, so a seeded run varies by about 1e-6): their floats are compared to this
#: many significant digits, and the ciphertexts' sizes (compressed random data) are dropped.
APPROXIMATE = {"demo": 4}
APPROXIMATE_VOLATILE = {"bytes_per_round", "setup_bytes", "bytes_sent", "bytes"}

#: The ``dpfed`` command of the running environment.
DPFED = str(Path(sys.executable).with_name("dpfed"))


def _strip(value, digits: int | None = None):
    """``value`` without its measured fields; with ``digits``, its floats to that many
    significant digits and without the ciphertexts' sizes (an approximate command's)."""
    dropped = VOLATILE if digits is None else VOLATILE | APPROXIMATE_VOLATILE
    if isinstance(value, dict):
        return {
            k: _strip(v, digits)
            for k, v in value.items()
            if k not in dropped and not k.endswith("_seconds")
        }
    if isinstance(value, list):
        return [_strip(v, digits) for v in value]
    if isinstance(value, float) and digits is not None:
        return float(f"{value:.{digits}g}")
    return value


def _digest_output(out: Path, digits: int | None = None) -> str:
    h = hashlib.sha256()
    files = sorted(out.rglob("*.json")) if out.is_dir() else [out]
    for f in files:
        h.update(f.name.encode())
        h.update(json.dumps(_strip(json.loads(f.read_text()), digits), sort_keys=True).encode())
    return h.hexdigest()


def main(names: list[str]) -> int:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    digests: dict[str, str] = {}
    for name in names or list(COMMANDS):
        args = COMMANDS[name]
        with tempfile.TemporaryDirectory() as tmp:
            folder = name.startswith("reproduce")
            out = Path(tmp) / ("out" if folder else "result.json")
            argv = [a.replace("{out}", str(out)) for a in args]
            done = subprocess.run([DPFED, *argv], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                digests[name] = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
                continue
            if "{out}" not in args:
                out.write_text(done.stdout.splitlines()[0])  # the JSON line
            digests[name] = _digest_output(out, APPROXIMATE.get(name))
    for name, digest in digests.items():
        print(f"{name}: {digest[:16]}", file=sys.stderr)
    json.dump(digests, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
