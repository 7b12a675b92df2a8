"""dpfed: differentially private learning across parties that do not share their data.

Layers (each imports only from the ones before it)::

    core -> privacy -> protocols -> runtime -> data -> estimators -> experiments -> cli

``core`` holds the pure optimisation math, ``privacy`` the mechanisms, sensitivity bounds
and accountants, ``protocols`` the parties' roles as transport-free state machines,
``runtime`` the transports that carry their messages, ``data`` the readers and partitioners,
``estimators`` the scikit-learn style front ends.
"""

from dpfed._validation import DpfedInputError

__version__ = "0.2.0"

__all__ = ["DpfedInputError", "__version__"]
