"""Deterministic synthetic drone telemetry: the data every labformat lab writes, upserts and queries.

One reading per drone per minute, keyed `YYYYMMDDHHmm_droneNNNN` (or a UUID-like hash of
that key with `key_style="random"`), generated in Spark from a seed so that the same spec
gives the same rows on any machine and core count. See datasets/README.md for the recipe.

    from labformat import datasets
    spec = datasets.spec("small")                      # or "tiny", "medium", "large"; overrides by keyword
    df = datasets.history(spark, spec)                 # the initial history (bulk insert)
    up = datasets.batch(spark, spec, 1)                # daily upsert batch 1..spec.batch_days
    cached = datasets.generate(spark, spec)            # parquet cache, reused when complete
    df = datasets.load_history(spark, cached)
    up = datasets.load_batch(spark, cached, 1)
"""

from labformat.cache_dir import cache_root
from labformat.errors import DatasetNotCachedError
from labformat.datasets.cache import (
    CachedDataset,
    default_cache_dir,
    generate,
    load_batch,
    load_history,
    parquet_bytes,
)
from labformat.datasets.drone import (
    COLUMNS,
    GENERATOR_CONF,
    PARTITION_FIELD,
    PRECOMBINE_FIELD,
    RECORD_KEY,
    SCHEMA,
    STATUSES,
    BatchParts,
    batch,
    batch_parts,
    fingerprint,
    history,
    salt,
    uniform,
)
from labformat.datasets.sample import write_sample
from labformat.datasets.spec import KEY_STYLES, PRESETS, SCENARIOS, DatasetSpec, spec

__all__ = [
    "COLUMNS",
    "KEY_STYLES",
    "PARTITION_FIELD",
    "PRECOMBINE_FIELD",
    "PRESETS",
    "SCENARIOS",
    "RECORD_KEY",
    "SCHEMA",
    "STATUSES",
    "BatchParts",
    "CachedDataset",
    "DatasetNotCachedError",
    "DatasetSpec",
    "GENERATOR_CONF",
    "batch",
    "batch_parts",
    "cache_root",
    "default_cache_dir",
    "fingerprint",
    "generate",
    "parquet_bytes",
    "history",
    "load_batch",
    "load_history",
    "spec",
    "salt",
    "uniform",
    "write_sample",
]
