"""Java's `String.hashCode()`, vectorised over Arrow strings: Hudi's hash of record keys (bucket ids, record-index shards)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_powers = np.ones(1, dtype=np.uint32)


def _powers_of_31(n: int) -> np.ndarray:
    """31^0 .. 31^(n-1) modulo 2^32, as Java's int arithmetic wraps."""
    global _powers
    if len(_powers) < n:
        powers = np.ones(n, dtype=np.uint32)
        with np.errstate(over="ignore"):
            for i in range(1, n):
                powers[i] = powers[i - 1] * np.uint32(31)
        _powers = powers
    return _powers[:n]


def _utf16_units(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-16 code units of every string, concatenated, and each string's count of them.
    Java hashes a String's UTF-16 code units; an ASCII string's are its bytes, read with no copy."""
    values = pc.fill_null(values.cast(pa.large_string()), "")
    if len(values) == 0 or pc.all(pc.string_is_ascii(values)).as_py():
        offsets = np.frombuffer(values.buffers()[1], np.int64)[values.offset:values.offset + len(values) + 1]
        data = values.buffers()[2]
        units = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        return units[offsets[0]:offsets[-1]].astype(np.uint32), np.diff(offsets)
    encoded = [v.encode("utf-16-le") for v in values.to_pylist()]
    lengths = np.fromiter((len(e) // 2 for e in encoded), dtype=np.int64, count=len(encoded))
    return np.frombuffer(b"".join(encoded), dtype="<u2").astype(np.uint32), lengths


def java_string_hashes(values: pa.Array) -> np.ndarray:
    """Java's `String.hashCode()` of each string (a null's is 0, as `List.hashCode` counts it), as uint32:
    the sum of each code unit times 31 to the power of the units after it, modulo 2^32."""
    units, lengths = _utf16_units(values)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    units_after = np.repeat(ends, lengths) - 1 - np.arange(len(units))
    with np.errstate(over="ignore"):
        terms = units * _powers_of_31(int(lengths.max(initial=0)))[units_after]
        sums = np.concatenate([np.zeros(1, np.uint32), np.cumsum(terms, dtype=np.uint32)])
        hashes: np.ndarray = sums[ends] - sums[starts]
        return hashes


def record_index_shards(keys: pa.Array, shards: int) -> np.ndarray:
    """The record-index shard (metadata file group) of each key, as Hudi maps a key to one
    (`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`: `abs(abs(hashCode) % shards)`), as int32."""
    hashes = java_string_hashes(keys.cast(pa.string())).view(np.int32).astype(np.int64)
    # In int64, abs(Integer.MIN_VALUE) is 2^31, and 2^31 % n equals Java's abs(MIN_VALUE % n).
    return (np.abs(hashes) % shards).astype(np.int32)
