"""Empirical privacy audits: play the adversary against each mechanism and bound epsilon
from below (``dpfed audit``)."""
