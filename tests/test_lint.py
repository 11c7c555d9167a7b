"""The linter and the type checker: ruff with pyproject.toml's [tool.ruff] rules (pyflakes, pycodestyle,
bugbear) over the code, tests, scripts and solution notebooks; mypy, strict, over the library
([tool.mypy]: labformat/ but the lab's and the benchmark's helpers)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stdout[-5000:] + found.stderr[-2000:]


def _mypy(*args: str) -> subprocess.CompletedProcess:
    # A cache outside the checkout's tracked files (.cache/ is ignored): a second run takes seconds.
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".cache" / "mypy"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_strict_finds_nothing_in_the_library():
    found = _mypy()
    assert found.returncode == 0, found.stdout[-5000:] + found.stderr[-2000:]


def test_the_type_checker_is_strict_and_sees_pyspark(tmp_path):
    """What the run above would miss if the configuration stopped applying: an unannotated function
    (strict's disallow_untyped_defs) and a wrong use of a pyspark type (its annotations are read)."""
    module = tmp_path / "sample.py"
    module.write_text("from pyspark.sql import DataFrame\n\n\ndef f(x):\n    return x\n\n\n"
                      "def g(df: DataFrame) -> int:\n    return df.columns\n")
    found = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(module))
    assert "sample.py:4: error: Function is missing a type annotation" in found.stdout, found.stdout
    assert 'sample.py:9: error: Incompatible return value type (got "list[str]", expected "int")' in found.stdout, found.stdout
