"""`python -m labformat.bench`: run the benchmark (see labformat.bench.cli)."""

import sys

from labformat.bench.cli import main

sys.exit(main())
