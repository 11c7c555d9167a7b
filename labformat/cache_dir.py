"""Where labformat keeps what it makes once and reuses: generated datasets, the Spark JVM's class archive."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """$LABFORMAT_CACHE, else `<labformat checkout>/.cache`, else `~/.cache/labformat`."""
    env = os.environ.get("LABFORMAT_CACHE")
    if env:
        return Path(env).expanduser()
    here = Path(__file__).resolve()
    for folder in here.parents:
        pyproject = folder / "pyproject.toml"
        # An installed (non-editable) labformat may sit inside someone else's project: check the name.
        if pyproject.is_file() and _names_labformat(pyproject):
            return folder / ".cache"
    return Path.home() / ".cache" / "labformat"


def _names_labformat(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return 'name = "labformat"' in text
