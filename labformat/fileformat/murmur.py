"""Hadoop's MurmurHash (32-bit MurmurHash2, as `org.apache.hadoop.util.hash.MurmurHash` computes it), over many keys at once.

Hudi's bloom filters hash a key's UTF-8 bytes with it, k times over, each time seeded with the
previous result (Hadoop's `HashFunction`), and set bit `|h % bits|` (Java's remainder, which keeps
the sign of `h`). In pure Python that takes ~77 µs per 24-byte key for 30 hashes (13k keys/s,
measured); here the keys are grouped by byte length, so every step is one numpy operation over
all keys of that length (millions of keys/s: scripts/bloom_filter_speed.py).

Two details of Hadoop's version differ from the reference C code, and both change the result:
the 1-3 trailing bytes are taken in reverse order (the first trailing byte is shifted highest),
and each is a signed Java byte, so bytes >= 0x80 are sign-extended before the shift.
"""

from __future__ import annotations

from typing import Iterator, Sequence, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

M = np.uint32(0x5BD1E995)
# Keys hashed per step: the arrays of one step (a few of 4 bytes per key) stay in the CPU's cache.
CHUNK = 1 << 15
# Record keys as the filters take them: an Arrow string array (chunked or not), or a sequence of str.
Keys: TypeAlias = "pa.Array | pa.ChunkedArray | np.ndarray | Sequence[str]"


def utf8_buffers(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    """The keys' UTF-8 bytes, concatenated, and their offsets (n + 1 of them): Arrow's string layout."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(np.asarray(keys, dtype=object), pa.large_string())
    elif not pa.types.is_large_string(keys.type):
        keys = pc.cast(keys, pa.large_string())
    if keys.null_count:
        raise ValueError("a record key is null: a bloom filter holds strings only")
    _, offsets, data = keys.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64, count=len(keys) + 1, offset=keys.offset * 8)
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    return data, offsets


def _mixed_blocks(rows: np.ndarray, blocks: int) -> np.ndarray:
    """Each key's 4-byte little-endian blocks after MurmurHash2's seed-independent mixing (k *= m;
    k ^= k >>> 24; k *= m), one row per block: computed once, shared by all k hashes."""
    words = np.ascontiguousarray(rows[:, : 4 * blocks]).view("<u4").astype(np.uint32)
    words *= M
    words ^= words >> np.uint32(24)
    words *= M
    return np.ascontiguousarray(words.T)


def _tail(rows: np.ndarray, length: int) -> np.ndarray | None:
    """The trailing 1-3 bytes as Hadoop folds them in: signed, the first one shifted highest."""
    left = length % 4
    if not left:
        return None
    tail = np.zeros(len(rows), dtype=np.int32)
    for j in range(left):
        signed = rows[:, length - left + j].view(np.int8).astype(np.int32)
        tail ^= signed << np.int32(8 * (left - 1 - j))
    return tail.view(np.uint32)


def _murmur(h: np.ndarray, length: int, blocks: np.ndarray, tail: np.ndarray | None, scratch: np.ndarray) -> None:
    """MurmurHash2 of keys of `length` bytes, in place: `h` holds the seeds and receives the hashes."""
    h ^= np.uint32(length)
    for block in blocks:
        h *= M
        h ^= block
    if tail is not None:
        h ^= tail
        h *= M
    np.right_shift(h, np.uint32(13), out=scratch)
    h ^= scratch
    h *= M
    np.right_shift(h, np.uint32(15), out=scratch)
    h ^= scratch


def _chained(rows: np.ndarray, length: int, num_hashes: int, modulus: int) -> np.ndarray:
    """(num_hashes, keys) bit positions of keys that all have `length` bytes (> 0): one row per
    hash, so each step writes one contiguous row."""
    blocks = _mixed_blocks(rows, length // 4)
    tail = _tail(rows, length)
    # intp, numpy's index type: a uint32 index array would be copied to one at every lookup
    # (half of a probe's time, measured on 400k keys).
    out = np.empty((num_hashes, len(rows)), dtype=np.intp)
    h = np.zeros(len(rows), dtype=np.uint32)  # Hadoop's first seed is 0
    scratch = np.empty_like(h)
    for i in range(num_hashes):
        _murmur(h, length, blocks, tail, scratch)  # seeded with the previous hash
        # Java: Math.abs(h % bits) == |h| % bits. np.abs of int32 -2**31 stays -2**31, whose
        # unsigned view is 2**31, its true magnitude.
        np.abs(h.view(np.int32), out=scratch.view(np.int32))
        np.remainder(scratch, np.uint32(modulus), out=out[i])
    return out


def _by_length(keys: Keys) -> Iterator[tuple[np.ndarray, int, np.ndarray]]:
    """The keys in chunks of one byte length: (their indices, the length, their bytes as rows).

    Empty keys are left out: Hadoop refuses them ("key length must be > 0"), and Hudi never
    stores one (an empty record key is an error there, as in labformat).
    """
    if not len(keys):
        return
    data, offsets = utf8_buffers(keys)
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for group in np.split(order, bounds):
        length = int(lengths[group[0]]) if len(group) else 0
        if length == 0:
            continue
        for start in range(0, len(group), CHUNK):
            idx = group[start:start + CHUNK]
            yield idx, length, data[offsets[idx][:, None] + np.arange(length)]


def bit_positions(keys: Keys, num_hashes: int, num_bits: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Hadoop's k bit positions of each key, in chunks: (indices of the keys, their positions,
    shaped (k, keys)). Empty keys are left out."""
    for idx, length, rows in _by_length(keys):
        yield idx, _chained(rows, length, num_hashes, num_bits)


def probe(keys: Keys, num_hashes: int, num_bits: int, rows_of_bits: list[np.ndarray]) -> np.ndarray:
    """Per key, whether some bit array of `rows_of_bits` (a filter's rows, bool) has all of its k
    bits set: a bloom filter's might-contain.

    Hashes one position at a time and drops a key once every row has ruled it out: in a filter
    half full an absent key is out after two hashes on average, so probing mostly absent keys
    hashes a fraction of k times per key. An empty key answers True (no filter can hold one).
    """
    out = np.zeros(len(keys), dtype=bool)
    if not len(keys):
        return out
    hashed = np.zeros(len(keys), dtype=bool)
    for idx, length, rows in _by_length(keys):
        hashed[idx] = True
        blocks, tail = _mixed_blocks(rows, length // 4), _tail(rows, length)
        h = np.zeros(len(idx), dtype=np.uint32)
        ok = np.ones((len(rows_of_bits), len(idx)), dtype=bool)
        for _ in range(num_hashes):
            scratch = np.empty_like(h)
            _murmur(h, length, blocks, tail, scratch)
            np.abs(h.view(np.int32), out=scratch.view(np.int32))
            position = (scratch % np.uint32(num_bits)).astype(np.intp)
            for r, bits in enumerate(rows_of_bits):
                ok[r] &= bits[position]
            alive = ok.any(axis=0)
            # Keep hashing only the keys still in question, once copying them pays: in an
            # overfull filter nearly every key survives every hash, and copying after each one
            # made probing 3x slower than hashing them all.
            if alive.sum() < 0.75 * alive.size:
                idx, h, ok, blocks = idx[alive], h[alive], ok[:, alive], blocks[:, alive]
                tail = tail[alive] if tail is not None else None
                if not len(idx):
                    break
        out[idx[ok.any(axis=0)]] = True
    out[~hashed] = True
    return out


def murmur_hash(key: bytes | str, seed: int = 0) -> int:
    """Hadoop's MurmurHash of one key as a signed 32-bit int (for tests and inspection)."""
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    rows = np.frombuffer(raw, dtype=np.uint8)[None, :]
    h = np.array([seed & 0xFFFFFFFF], dtype=np.uint32)
    _murmur(h, len(raw), _mixed_blocks(rows, len(raw) // 4), _tail(rows, len(raw)), np.empty_like(h))
    return int(h.view(np.int32)[0])
