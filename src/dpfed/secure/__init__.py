"""Homomorphic encryption for the secure vertical mode: ``ckks`` (TenSEAL's CKKS: keys,
long vectors, :math:`X^\\top \\mathrm{Enc}(v)`) and ``sigmoid`` (the polynomial that stands in
for the sigmoid under encryption, with its certified bounds)."""
