#!/usr/bin/env python3
"""The instructor's guide's timetable, from a main job's run: each notebook's run time as `out/summary.md` recorded it.

    python3 scripts/timetable.py [OUT ...] [--write] [--machine TEXT]

Reads OUT/summary.md (default out/, as `python3 scripts/lab.py run` leaves it) and prints the
timetable: one row per notebook run, with the "what it is about" text the guide already has for it.
Several OUT folders (runs of some notebooks each, `--only ... --out OUT`) make one table, a later
run's time of a notebook replacing an earlier one's.
--write puts it in docs/instructor-guide.md between its `<!-- timetable -->` markers, with the
date of the run, the machine (--machine, else what this one is: OS, CPU, cores, memory) and the
claims that held. Run it on the machine the job ran on, after a `small` run of all nine notebooks.

Standard library only.
"""

import argparse
import datetime
import os
import platform
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "instructor-guide.md")
BEGIN, END = "<!-- timetable: begin -->", "<!-- timetable: end -->"

_PRESET = re.compile(r"^# Workshop run at preset `([^`]+)`", re.M)
_NOTEBOOK = re.compile(r"^## (\d\d-[a-z0-9-]+) \((\d+) s\)$", re.M)
_EXACT = re.compile(r"(\d+) of (\d+) claims on exact quantities held")
_TIMING = re.compile(r"(\d+) of (\d+) timing claims held")
_ROW = re.compile(r"^\| `(\d\d-[a-z0-9-]+)` \| [^|]* \| (.*) \|$", re.M)
_CLAIM = re.compile(r"^\| (\d\d) \| (.*) \| ([^|]*) \|$", re.M)  # lab, claim and evidence, verdict


def read_summary(text):
    """{preset, notebooks: [(name, seconds)], exact: (held, of) or None, timing: (held, of) or None,
    claims: `claims_by_lab`}."""
    preset = _PRESET.search(text)
    if not preset:
        raise ValueError("not a workshop summary: no `# Workshop run at preset` heading")
    exact, timing = _EXACT.search(text), _TIMING.search(text)
    return {
        "preset": preset.group(1),
        "notebooks": [(name, int(seconds)) for name, seconds in _NOTEBOOK.findall(text)],
        "exact": tuple(map(int, exact.groups())) if exact else None,
        "timing": tuple(map(int, timing.groups())) if timing else None,
        "claims": claims_by_lab(text),
    }


def claims_by_lab(text):
    """{lab: [exact held, exact claims, timing held, timing claims]} from the summary's table of claims."""
    labs = {}
    for lab, middle, verdict in _CLAIM.findall(text):
        counts = labs.setdefault(lab, [0, 0, 0, 0])
        at = 2 if " (timing) | " in middle else 0
        counts[at] += verdict.strip() == "held"
        counts[at + 1] += 1
    return labs


def merge(summaries):
    """One summary from several runs: the notebooks in the order first seen, a later run's seconds
    and claims of a lab replacing an earlier run's; the claims of a summary without its table of
    claims count as they are."""
    seconds, labs = {}, {}
    for i, summary in enumerate(summaries):
        seconds.update(summary["notebooks"])
        for name, _ in summary["notebooks"]:  # run again: its earlier claims go, even if this run made none
            labs.pop(name[:2], None)
        if summary.get("claims"):
            labs.update(summary["claims"])
        else:
            labs[i] = list(summary["exact"] or (0, 0)) + list(summary["timing"] or (0, 0))
    exact = [sum(c[0] for c in labs.values()), sum(c[1] for c in labs.values())]
    timing = [sum(c[2] for c in labs.values()), sum(c[3] for c in labs.values())]
    presets = sorted({s["preset"] for s in summaries})
    if len(presets) != 1:
        raise ValueError("runs at different presets: {}".format(", ".join(presets)))
    return {"preset": presets[0], "notebooks": list(seconds.items()),
            "exact": tuple(exact) if exact[1] else None, "timing": tuple(timing) if timing[1] else None}


def minutes(seconds):
    return "{} s".format(seconds) if seconds < 60 else "{} s ({}:{:02d})".format(seconds, seconds // 60, seconds % 60)


def this_machine():
    cores = os.cpu_count() or 0
    memory = ""
    try:
        with open("/proc/meminfo") as handle:
            kib = int(handle.readline().split()[1])
        memory = ", {:.0f} GiB".format(kib / 1024 ** 2)
    except (OSError, ValueError, IndexError):
        pass
    return "{} {}, {} cores{}".format(platform.system(), platform.machine(), cores, memory)


def timetable(summary, about, when, machine, runs=1):
    """The guide's block: the table (a row per notebook, in run order) and where the numbers come from."""
    rows = ["| lab | run time at `{}` | what it is about |".format(summary["preset"]), "| --- | --- | --- |"]
    rows += ["| `{}` | {} | {} |".format(name, minutes(seconds), about.get(name, "")) for name, seconds in summary["notebooks"]]
    total = sum(seconds for _, seconds in summary["notebooks"])
    rows.append("| all {} | {} | |".format(len(summary["notebooks"]), minutes(total)))
    held = []
    if summary["exact"]:
        held.append("{} of {} claims on exact quantities".format(*summary["exact"]))
    if summary["timing"]:
        held.append("{} of {} timing claims".format(*summary["timing"]))
    how = "the main job" if runs == 1 else "{} runs of the main job".format(runs)
    source = ("Measured on {} by `python3 scripts/lab.py run` on {} (each notebook run top to bottom by {}; "
              "{} held). Update it after a run with `python3 scripts/timetable.py out --write`.").format(
                  when, machine, how, " and ".join(held) or "no claims recorded")
    return "\n".join([BEGIN] + rows + ["", source, END])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="*", help="the main job's output folders (default: out/)")
    parser.add_argument("--write", action="store_true", help="rewrite the timetable in docs/instructor-guide.md")
    parser.add_argument("--machine", default=None, help="what the job ran on (default: this machine's OS, CPU, cores, memory)")
    parser.add_argument("--guide", default=GUIDE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    paths = [os.path.join(out, "summary.md") for out in args.out or [os.path.join(ROOT, "out")]]
    summaries = []
    for path in paths:
        with open(path) as handle:
            summaries.append(read_summary(handle.read()))
    summary = merge(summaries)
    with open(args.guide) as handle:
        guide = handle.read()
    if guide.count(BEGIN) != 1 or guide.count(END) != 1:
        sys.stderr.write("error: {} must hold one {} and one {}\n".format(args.guide, BEGIN, END))
        return 1
    head, rest = guide.split(BEGIN)
    old, tail = rest.split(END)
    when = datetime.date.fromtimestamp(max(os.path.getmtime(path) for path in paths)).isoformat()
    block = timetable(summary, dict(_ROW.findall(old)), when, args.machine or this_machine(), len(paths))
    if not args.write:
        print(block)
        return 0
    with open(args.guide, "w") as handle:
        handle.write(head + block + tail)
    print("wrote the timetable of {} notebooks into {}".format(len(summary["notebooks"]), args.guide))
    return 0


if __name__ == "__main__":
    sys.exit(main())
