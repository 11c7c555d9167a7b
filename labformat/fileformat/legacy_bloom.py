"""labformat's own record-key bloom filter of tables written before base files carried Hudi's: read only.

Footer entries `labformat_bloom_filter` (base64) with `labformat_bloom_filter_type` =
`LFBF1_SIPHASH_DOUBLE_HASHING`. Layout: magic `LFBF`, version 1, bits (u64), hashes (u32), all
little-endian, then the bits packed most significant first; positions by double hashing of
pandas' SipHash of the key. New files never get one: a merge that rewrites a file group replaces
it with Hudi's filter, so an old table moves over as its file groups are rewritten.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa

if TYPE_CHECKING:
    from labformat.fileformat.murmur import Keys

LEGACY_FOOTER = "labformat_bloom_filter"
LEGACY_TYPE_FOOTER = "labformat_bloom_filter_type"
LEGACY_TYPE = "LFBF1_SIPHASH_DOUBLE_HASHING"

_MAGIC = b"LFBF"
_VERSION = 1
_HEADER = struct.Struct("<4sBQI")
# pandas' SipHash key: part of the stored format.
_HASH_KEY = "labformat-bloom1"


@dataclass
class LegacyBloomFilter:
    """A filter in labformat's first layout; `might_contain` as it always answered."""

    num_bits: int
    num_hashes: int
    bits: np.ndarray  # bool, one entry per bit

    type_code: ClassVar[str] = LEGACY_TYPE

    def might_contain(self, keys: Keys) -> np.ndarray:
        values = np.asarray(keys.to_numpy(zero_copy_only=False) if isinstance(keys, (pa.Array, pa.ChunkedArray)) else keys,
                            dtype=object)
        if not len(values):
            return np.zeros(0, dtype=bool)
        h = pd.util.hash_array(values, hash_key=_HASH_KEY, categorize=False)
        h1 = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        h2 = ((h >> np.uint64(32)) | np.uint64(1)).astype(np.uint32)
        g = h1[:, None] + np.arange(self.num_hashes, dtype=np.uint32)[None, :] * h2[:, None]
        positions = (g.astype(np.uint64) * np.uint64(self.num_bits)) >> np.uint64(32)
        return np.asarray(self.bits[positions.view(np.int64)].all(axis=1))

    def to_base64(self) -> str:
        header = _HEADER.pack(_MAGIC, _VERSION, self.num_bits, self.num_hashes)
        return base64.b64encode(header + np.packbits(self.bits).tobytes()).decode("ascii")

    @classmethod
    def from_base64(cls, text: str | bytes) -> "LegacyBloomFilter":
        data = base64.b64decode(text)
        if len(data) < _HEADER.size:
            raise ValueError("bloom filter too short")
        magic, version, num_bits, num_hashes = _HEADER.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise ValueError(f"not a labformat bloom filter (magic {magic!r}, version {version})")
        packed = np.frombuffer(data, dtype=np.uint8, offset=_HEADER.size)
        if packed.size * 8 < num_bits:
            raise ValueError("bloom filter truncated")
        return cls(num_bits, num_hashes, np.unpackbits(packed)[:num_bits].astype(bool))
