"""``python -m dpfed.cli``."""

import sys

from dpfed.cli.main import main

sys.exit(main())
