"""Transports that carry the roles' messages, and the jobs that run protocols on them."""
