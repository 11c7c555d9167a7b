"""One benchmark job in a process of its own: `python -m labformat.bench.worker JOB.json RESULT.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from labformat.bench.runner import run_job


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m labformat.bench.worker JOB.json RESULT.json\n")
        return 2
    job = json.loads(Path(argv[0]).read_text())
    result = run_job(job)
    Path(argv[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
