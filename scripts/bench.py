"""Headless benchmark: labformat's daily upserts and queries against its peers and the I/O floor.

    python scripts/bench.py --preset small --repeat 3      # same as python -m labformat.bench

Options: python scripts/bench.py --help. Results go to bench/results/, docs to docs/benchmarks.md.
"""

from __future__ import annotations

import sys

from labformat.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
