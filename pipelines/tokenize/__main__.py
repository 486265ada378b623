"""``python -m pipelines.tokenize``."""

import sys

from pipelines.tokenize.driver import main

sys.exit(main())
