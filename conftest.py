"""Repository-wide pytest set-up: the workshop notebooks run under nbval, strictly, at the `tiny` preset."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# Read by labformat.lab.workshop inside every notebook kernel nbval starts (kernels inherit the
# environment). Set at import, before any kernel exists; an explicit value from the caller wins.
os.environ.setdefault("LABFORMAT_PRESET", "tiny")
os.environ.setdefault("LABFORMAT_SPARK_MASTER", "local[2]")


def pytest_configure(config):
    option = config.option
    if hasattr(option, "nbval"):
        # Strict nbval (outputs compared) on every .ipynb collected; never --nbval-lax.
        if not option.nbval_lax:
            option.nbval = True
        # The kernel is this interpreter (.venv's), whatever kernelspecs the machine has.
        option.nbval_current_env = True
        if option.nbval_sanitize_with is None:
            option.nbval_sanitize_with = str(ROOT / "tests" / "nbval_sanitize.cfg")
