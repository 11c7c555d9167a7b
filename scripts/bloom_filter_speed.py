"""Keys per second of Hudi's bloom filters (SIMPLE, DYNAMIC_V0) against labformat's first filter (git main before issue 19).

    python scripts/bloom_filter_speed.py [--keys 400000] [--repeat 5] [--old-ref 5e65dfd]

Build: a filter sized for `--num-entries` at 1e-9 (30 hashes) filled with drone keys
(`YYYYMMDDHHmm_droneNNNNNN`, 24 bytes), serialized. Probe: the same keys (all present), then as
many absent ones (an absent key is ruled out after a few of its 30 hashes). The old filter
is loaded from git (`--old-ref`), as it was. Median of `--repeat` runs after one untimed one.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from labformat.fileformat.bloom_filter import BloomSpec

ROOT = Path(__file__).resolve().parents[1]


def _old_filter(ref: str):
    source = subprocess.run(["git", "show", f"{ref}:labformat/fileformat/bloom_filter.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_bloom_filter.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_bloom_filter", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.BloomFilter


def _median_seconds(run, repeat: int) -> float:
    run()  # warm-up, untimed
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=400_000)
    parser.add_argument("--num-entries", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--old-ref", default="5e65dfd")
    args = parser.parse_args(argv)

    n = args.keys
    keys = pa.array([f"202401{(i // 86_400) % 28 + 1:02d}{(i // 3600) % 24:02d}{(i // 60) % 60:02d}_drone{i % 10**6:06d}"
                     for i in range(n)])
    absent = pa.array([f"202402{(i // 86_400) % 28 + 1:02d}{(i // 3600) % 24:02d}{(i // 60) % 60:02d}_drone{i % 10**6:06d}"
                       for i in range(n)])  # same length, next month: in no filter
    old = _old_filter(args.old_ref)
    fpp, entries = 1e-9, args.num_entries
    rows = []
    old_built = old.for_keys(keys, fpp, num_entries=entries)
    present_np, absent_np = keys.to_numpy(zero_copy_only=False), absent.to_numpy(zero_copy_only=False)
    rows.append(("labformat LFBF1 (old)",
                 _median_seconds(lambda: old.for_keys(keys, fpp, num_entries=entries).to_base64(), args.repeat),
                 _median_seconds(lambda: old_built.might_contain(present_np), args.repeat),
                 _median_seconds(lambda: old_built.might_contain(absent_np), args.repeat)))
    for kind in ("SIMPLE", "DYNAMIC_V0"):
        spec = BloomSpec(kind, entries, fpp)
        built = spec.build(keys)
        rows.append((f"Hudi {kind}", _median_seconds(lambda: spec.build(keys).to_base64(), args.repeat),
                     _median_seconds(lambda: built.might_contain(keys), args.repeat),
                     _median_seconds(lambda: built.might_contain(absent), args.repeat)))
    print(f"{n:,} keys of 24 bytes, filters for {entries:,} entries at {fpp:g}; keys per second, median of {args.repeat}")
    print(f"{'filter':24} {'build':>11} {'probe present':>14} {'probe absent':>13}")
    for name, *seconds in rows:
        print(f"{name:24} " + " ".join(f"{n / s:>{w},.0f}" for s, w in zip(seconds, (11, 14, 13))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
