"""The linter: ruff with pyproject.toml's [tool.ruff] rules (pyflakes, pycodestyle, bugbear) over the code,
tests, scripts and solution notebooks."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stdout[-5000:] + found.stderr[-2000:]
