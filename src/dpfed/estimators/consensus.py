"""The consensus ADMM estimator, generated from its protocol's in-process training
(:mod:`dpfed.estimators.generated`): ``X`` holds every client's rows; ``fit`` cuts them into
clients, each row scaled to unit norm as the privacy analysis assumes, and runs the protocol;
prediction uses the learned global model on rows scaled the same way."""

from __future__ import annotations

from dpfed.estimators.generated import estimator_for

__all__ = ["ConsensusLogisticRegression"]

ConsensusLogisticRegression = estimator_for("consensus")
"""Logistic regression by (DP) consensus ADMM between ``n_clients`` clients and a server.

A class generated from the protocol's in-process training
(:data:`~dpfed.protocols.consensus.driver.CONSENSUS_TRAINING`,
:mod:`dpfed.estimators.generated`):
``ConsensusLogisticRegression(n_clients=10, *, lam=1e-5, rho=0.015, ..., random_state=None)``.
Its parameters are ``n_clients`` (the rows are cut into that many clients at random with
``random_state``, each row scaled to unit norm), every field of
:class:`~dpfed.protocols.consensus.driver.ConsensusConfig` but ``loss`` (logistic) and
``seed`` (``random_state`` seeds the split and the noise), with the configuration's defaults
except ``lam = 1e-5`` and ``rho = 0.015`` (paper 002's settings on Adult). ``help()`` on the
class lists them with their help. After ``fit``: ``coef_`` (shape ``(1, n_features)``, weights
of the rows scaled to unit norm), ``intercept_``, ``history_``, ``privacy_spent_`` (every
client's epsilon) and ``result_``.
"""
