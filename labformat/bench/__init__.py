"""The benchmark: labformat's daily upserts and queries side by side with its peers and the I/O floor.

    python -m labformat.bench --preset small --repeat 3     # or: python3 scripts/lab.py bench ...

`run_benchmark` runs it and returns the results as a dict; `render` turns recorded results
into markdown, charts and docs/benchmarks.md. See docs/benchmarks.md for what is measured.
"""

from labformat.bench.engines import DEFAULT_ENGINES, ENGINES, PEERS, REFERENCE, S3_ENGINES, deduplicate_arrow
from labformat.bench.runner import BenchmarkError, run_benchmark

__all__ = ["DEFAULT_ENGINES", "ENGINES", "S3_ENGINES", "PEERS", "REFERENCE", "BenchmarkError", "deduplicate_arrow",
           "run_benchmark"]
