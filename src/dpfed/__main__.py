"""``python -m dpfed``: the ``dpfed`` command."""

import sys

from dpfed.cli.main import main

sys.exit(main())
