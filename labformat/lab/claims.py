"""Lesson claims: what a notebook teaches, stated as a check on the numbers of the learner's own run.

A notebook collects its claims in a `Lessons` and shows them; `save()` keeps them for the main
job's `out/summary.md`. An exact claim is decided by counts (files, bytes, tasks, keys) and must
hold at every preset: the main job fails when one breaks, and the saved notebooks (run at `tiny`)
must show every exact claim held. A timing claim is decided by medians after a warm-up; it is
reported with its spread and never fails the run, since a shared 2-core machine is noisy.

    lessons = Lessons("02-daily-upserts")
    lessons.claim("range pruning kept a smaller share of the files on the last day than on the first",
                  last_share < first_share, f"day 1: {a} of {n}; day 28: {b} of {m}")
    lessons.save()
    lessons.only(exact=True)  # one line per claim: [held] or [BROKEN], the claim, its evidence
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from labformat.errors import LabformatError

HELD, BROKEN = "held", "BROKEN"
SUFFIX = ".claims.json"


@dataclass(frozen=True)
class Claim:
    """One lesson as a check: `held` was computed from the run, `evidence` shows the numbers it used."""

    lab: str
    text: str
    held: bool
    evidence: str
    exact: bool = True  # decided by exact quantities; False: by timings (reported, never fatal)

    @property
    def verdict(self) -> str:
        return HELD if self.held else BROKEN


class Lessons:
    """The claims one notebook makes, in the order it makes them."""

    def __init__(self, lab: str):
        self.lab = lab
        self.claims: list[Claim] = []

    def claim(self, text: str, held, evidence: str, exact: bool = True) -> Claim:
        """Record that the run shows `text`; `held` must be a real bool computed from the run."""
        # numpy.bool_ is fine; a string or a number is a mistake that would always read as "held".
        if type(held).__name__ not in ("bool", "bool_"):
            raise LabformatError(f"claim {text!r}: held must be a bool computed from the run, got {held!r}")
        if any(c.text == text for c in self.claims):
            raise LabformatError(f"claim {text!r} is made twice in {self.lab}")
        made = Claim(self.lab, text, bool(held), str(evidence), bool(exact))
        self.claims.append(made)
        return made

    def frame(self, exact: bool | None = None) -> pd.DataFrame:
        """One row per claim (optionally only the exact or only the timing ones): claim, evidence, verdict."""
        chosen = [c for c in self.claims if exact is None or c.exact == exact]
        return pd.DataFrame([{"claim": c.text, "evidence": c.evidence, "verdict": c.verdict} for c in chosen],
                            columns=["claim", "evidence", "verdict"])

    def only(self, exact: bool) -> "Lessons":
        """The exact claims (counts) or the timing ones, as a Lessons that shows each in full."""
        view = Lessons(self.lab)
        view.claims = [c for c in self.claims if c.exact == exact]
        view.kind = "claims on exact quantities" if exact else "timing claims (medians after a warm-up; never fatal)"
        return view

    kind = "lesson claims"

    def broken(self, exact_only: bool = True) -> list[Claim]:
        return [c for c in self.claims if not c.held and (c.exact or not exact_only)]

    def __repr__(self) -> str:
        lines = [f"{len(self.claims)} {self.kind} of {self.lab}:"]
        for c in self.claims:
            kind = "" if c.exact else " (timing)"
            lines.append(f"  [{c.verdict}] {c.text}{kind}: {c.evidence}")
        return "\n".join(lines)

    def save(self, folder: Path | None = None) -> Path:
        """Write the claims to <out>/summary/<lab>.claims.json for the workshop summary."""
        if folder is None:
            from labformat.lab.workshop import out_dir

            folder = out_dir() / "summary"
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.lab}{SUFFIX}"
        path.write_text(json.dumps([asdict(c) for c in self.claims], indent=2) + "\n")
        return path


def load(folder: Path, lab: str) -> list[Claim]:
    """The claims a notebook saved under `folder` (none if it saved none)."""
    path = Path(folder) / f"{lab}{SUFFIX}"
    if not path.exists():
        return []
    return [Claim(**c) for c in json.loads(path.read_text())]
