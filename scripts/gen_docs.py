"""Regenerate docs/options.md from the option registry (tests/test_config.py fails when it drifts)."""

from pathlib import Path

from labformat.config import options_markdown

if __name__ == "__main__":
    target = Path(__file__).resolve().parents[1] / "docs" / "options.md"
    target.write_text(options_markdown(), encoding="utf-8")
    print(f"wrote {target}")
