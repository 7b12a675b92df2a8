"""Secure aggregation: the Distributed Compute Algorithm (DCA) of Heikkilä et al. (2017).

Clients secret-share fixed-point encodings of their noisy vectors between compute nodes; the
sum of the nodes' sums is the sum of the vectors, while no single node learns anything about
one client's vector. Modules, one concept each:

``fixedpoint``
    real values <-> integers modulo 2^64, with overflow refused;
``keystream``
    uniform 64-bit mask words from AES-256-CTR;
``noise``
    each client's Gaussian noise, reproducible per client from the run's seed;
``shares``
    additive secret sharing modulo 2^64;
``envelope``
    encryption of one message for one compute node (X25519, HKDF-SHA256, AES-GCM);
``agreement``
    the compute nodes' agreement on the clients to aggregate after dropouts;
``source``
    client vectors as arrays, block callables or iterables of blocks;
``synthetic``
    bounded uniform client vectors for benchmarks;
``secure_sum``
    the whole protocol, simulated in-process.

The privacy calibration of the noise is :mod:`dpfed.dca.calibration`.
"""

from dpfed.dca.fixedpoint import DEFAULT_FRACTIONAL_BITS, decode, encode, value_bound
from dpfed.dca.keystream import MaskStream
from dpfed.dca.secure_sum import SecureSumResult, secure_sum

__all__ = [
    "DEFAULT_FRACTIONAL_BITS",
    "MaskStream",
    "SecureSumResult",
    "decode",
    "encode",
    "secure_sum",
    "value_bound",
]
