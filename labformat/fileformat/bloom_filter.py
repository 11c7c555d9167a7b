"""Hudi's record-key bloom filters, byte for byte: SIMPLE (a Hadoop BloomFilter) and DYNAMIC_V0 (Hudi's bounded dynamic filter).

What Apache Hudi writes into a base file's footer (`org.apache.hudi.bloomfilter`, base64 with
padding, as java.util.Base64 encodes) is a Hadoop Writable, big-endian:
- a Hadoop BloomFilter (Hudi's InternalBloomFilter): int -1 (the format version), int hashes,
  byte hash type (1: Murmur), int bits, then ceil(bits / 8) bytes, bit i in byte i // 8 under
  the mask 1 << (i % 8). Key i sets the bits `murmur.bit_positions` gives.
- DYNAMIC_V0 (HoodieDynamicBoundedBloomFilter): that 13-byte header, then int keys per row
  (num_entries), int keys in the last row, int rows, then each row as a Hadoop BloomFilter of the
  same size. Rows fill in turn until rows x num_entries reaches the maximum entries; from then
  on keys go to the rows round-robin, and the false-positive rate is no longer bounded.
Hudi writes `hoodie_bloom_filter_type_code` only for DYNAMIC_V0; a footer without it is SIMPLE.

Sizing (Hudi's BloomFilterUtils): bits = ceil(n x -ln(fpp) / ln(2)^2), hashes = ceil(ln 2 x bits / n),
for n = `hoodie.index.bloom.num_entries`, whatever the file really holds.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

from labformat.fileformat.legacy_bloom import LEGACY_TYPE, LegacyBloomFilter
from labformat.fileformat.murmur import Keys, bit_positions, probe
from labformat.model.enums import BloomFilterTypeCode

SIMPLE = BloomFilterTypeCode.SIMPLE
DYNAMIC_V0 = BloomFilterTypeCode.DYNAMIC_V0
MURMUR_HASH = 1  # Hadoop's Hash.MURMUR_HASH, the only hash Hudi's factory uses
_VERSION = -1  # Hadoop's Filter.VERSION: negative, to tell it from the unversioned format
_HEADER = struct.Struct(">iibi")  # version, hashes, hash type, bits
_DYNAMIC = struct.Struct(">iii")  # keys per row, keys in the last row, rows
_LOG2_SQUARED = math.log(2) * math.log(2)
_INT_MAX = 2**31 - 1


def sizing(num_entries: int, fpp: float) -> tuple[int, int]:
    """(bits, hashes) of a filter for `num_entries` keys at false-positive probability `fpp`,
    computed as Hudi's BloomFilterUtils does (same double operations, same order)."""
    bits = math.ceil(num_entries * (-math.log(fpp) / _LOG2_SQUARED))
    if bits > _INT_MAX:
        raise ValueError(f"a bloom filter of {bits} bits: more than a Java int can size "
                         f"(hoodie.index.bloom.num_entries {num_entries} at fpp {fpp})")
    return bits, math.ceil(math.log(2) * bits / num_entries)


def _row_fpp(bits: int, hashes: int, keys: int) -> float:
    return (1.0 - math.exp(-hashes * keys / bits)) ** hashes


@dataclass(frozen=True)
class BloomSpec:
    """How a base file's filter is built: Hudi's `hoodie.bloom.index.filter.type`,
    `hoodie.index.bloom.num_entries`, `hoodie.index.bloom.fpp` and (DYNAMIC_V0 only)
    `hoodie.bloom.index.filter.dynamic.max.entries`."""

    type_code: str = SIMPLE
    num_entries: int = 60_000
    fpp: float = 1e-9
    max_entries: int = 100_000

    @property
    def bits_and_hashes(self) -> tuple[int, int]:
        return sizing(self.num_entries, self.fpp)

    def row_sizes(self, keys: int) -> list[int]:
        """Keys per row once the filter holds `keys` keys: one row for SIMPLE."""
        if self.type_code == SIMPLE:
            return [keys]
        return [int(n) for n in np.bincount(dynamic_rows(keys, self.num_entries, self.max_entries)[0], minlength=1)]

    def predicted_fpp(self, keys: int) -> float:
        """The false-positive rate once the filter holds `keys` keys: (1 - e^(-hashes x keys / bits))
        ^ hashes per row, and for DYNAMIC_V0 a key passes if any row passes it. About `fpp` at
        num_entries keys; beyond, SIMPLE's grows fast, DYNAMIC_V0's slowly until its last row."""
        bits, hashes = self.bits_and_hashes
        miss = 1.0
        for n in self.row_sizes(keys):
            miss *= 1.0 - _row_fpp(bits, hashes, n)
        return 1.0 - miss

    def build(self, keys: Keys) -> "RecordKeyFilter":
        """A filter holding `keys` (in this order: DYNAMIC_V0's rows depend on it)."""
        bits, hashes = self.bits_and_hashes
        if self.type_code == SIMPLE:
            simple = SimpleBloomFilter.empty(bits, hashes)
            simple.add(keys)
            return simple
        if self.type_code == DYNAMIC_V0:
            return DynamicBloomFilter.build(keys, bits, hashes, self.num_entries, self.max_entries)
        raise ValueError(f"unknown bloom filter type {self.type_code!r}")

    def built_as(self, encoded: str, type_code: str | None, keys: int) -> bool:
        """Whether a stored filter of a file holding `keys` keys is laid out as `build` would lay
        out one for these keys: then the same keys in the same order give the same bytes, and a
        rewrite that keeps a file's keys can keep its filter. Read from the header alone."""
        if _type(type_code) != self.type_code:
            return False
        bits, hashes = self.bits_and_hashes
        try:
            head = _head(encoded, _HEADER.size + _DYNAMIC.size)
        except ValueError:  # not base64: certainly not a filter to keep
            return False
        if len(head) < _HEADER.size or _HEADER.unpack_from(head) != (_VERSION, hashes, MURMUR_HASH, bits):
            return False
        if self.type_code == SIMPLE:
            return True
        rows, last = dynamic_rows(keys, self.num_entries, self.max_entries)[1:]
        return len(head) == _HEADER.size + _DYNAMIC.size and \
            _DYNAMIC.unpack_from(head, _HEADER.size) == (self.num_entries, last, rows)


def _head(encoded: str | bytes, size: int) -> bytes:
    """The first `size` bytes of a base64 text, decoding only its start."""
    return base64.b64decode(encoded[: 4 * math.ceil(size / 3)])[:size]


def _type(type_code: str | None) -> str:
    """Hudi's reading of a footer's type code: none means SIMPLE; names compare case-insensitively."""
    if not type_code:
        return SIMPLE
    upper = type_code.upper()
    return upper if upper in (SIMPLE, DYNAMIC_V0) else type_code


def dynamic_rows(keys: int, per_row: int, max_entries: int) -> tuple[np.ndarray, int, int]:
    """Where DYNAMIC_V0 puts each of `keys` keys added in turn: (row of each key, rows, keys
    Hudi counts in the last row). Hudi's InternalDynamicBloomFilter adds a row when the current
    one holds `per_row` keys while rows x per_row < max_entries; once it is not, the next key
    goes to row 0 and every later one round-robin from row 0 (its counter starts there), and
    the count of the last row keeps growing."""
    full = max(1, math.ceil(max_entries / per_row))  # rows once grown to the bound
    index = np.arange(keys, dtype=np.int64)
    filling = full * per_row
    row = np.where(index < filling, index // per_row, 0)
    late = index > filling
    row[late] = (index[late] - filling - 1) % full
    rows = full if keys > filling else max(1, math.ceil(keys / per_row))
    return row, rows, keys - (rows - 1) * per_row


class RecordKeyFilter(Protocol):
    """What every filter answers: a bool per key, False meaning certainly absent."""

    @property
    def type_code(self) -> str: ...

    def might_contain(self, keys: Keys) -> np.ndarray: ...

    def to_base64(self) -> str: ...


def _read_header(data: bytes, offset: int) -> tuple[int, int]:
    """(hashes, bits) of the Hadoop filter header at `offset`, checked."""
    if len(data) < offset + _HEADER.size:
        raise ValueError("bloom filter truncated: no header")
    version, hashes, hash_type, bits = _HEADER.unpack_from(data, offset)
    if version != _VERSION:
        raise ValueError(f"bloom filter version {version}: only Hadoop's versioned format (-1) is read")
    if hash_type != MURMUR_HASH:
        raise ValueError(f"bloom filter hash type {hash_type}: only Murmur ({MURMUR_HASH}) is read")
    if bits <= 0 or hashes <= 0:
        raise ValueError(f"bloom filter of {bits} bits and {hashes} hashes")
    return hashes, bits


@dataclass
class SimpleBloomFilter:
    """SIMPLE: one Hadoop BloomFilter, hashed with Hadoop's MurmurHash."""

    num_bits: int
    num_hashes: int
    bits: np.ndarray = field(repr=False)  # bool, one entry per bit

    type_code: ClassVar[str] = SIMPLE

    @classmethod
    def empty(cls, num_bits: int, num_hashes: int) -> "SimpleBloomFilter":
        return cls(num_bits, num_hashes, np.zeros(num_bits, dtype=bool))

    def add(self, keys: Keys) -> None:
        for _, positions in bit_positions(keys, self.num_hashes, self.num_bits):
            self.bits[positions.ravel()] = True

    def might_contain(self, keys: Keys) -> np.ndarray:
        """One bool per key. An empty key answers True: Hadoop cannot hash one, so no filter
        can rule it out (and no table holds one)."""
        return probe(keys, self.num_hashes, self.num_bits, [self.bits])

    def to_bytes(self) -> bytes:
        return (_HEADER.pack(_VERSION, self.num_hashes, MURMUR_HASH, self.num_bits)
                + np.packbits(self.bits, bitorder="little").tobytes())

    @classmethod
    def read(cls, data: bytes, offset: int = 0) -> tuple["SimpleBloomFilter", int]:
        """The filter at `offset` and the offset after it."""
        hashes, bits = _read_header(data, offset)
        start, end = offset + _HEADER.size, offset + _HEADER.size + (bits + 7) // 8
        if len(data) < end:
            raise ValueError(f"bloom filter truncated: {bits} bits need {end - start} bytes")
        packed = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
        return cls(bits, hashes, np.unpackbits(packed, count=bits, bitorder="little").view(bool)), end

    @classmethod
    def from_bytes(cls, data: bytes) -> "SimpleBloomFilter":
        bloom, end = cls.read(data)
        if end != len(data):
            raise ValueError(f"{len(data) - end} bytes after a SIMPLE bloom filter (a DYNAMIC_V0 one?)")
        return bloom

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")


@dataclass
class DynamicBloomFilter:
    """DYNAMIC_V0: Hudi's bounded dynamic filter, rows of Hadoop BloomFilters of one size."""

    per_row: int  # Hadoop's nr: num_entries
    last_row_keys: int  # Hadoop's currentNbRecord
    rows: list[SimpleBloomFilter]

    type_code: ClassVar[str] = DYNAMIC_V0

    @classmethod
    def build(cls, keys: Keys, bits: int, hashes: int, per_row: int, max_entries: int) -> "DynamicBloomFilter":
        row_of, rows, last = dynamic_rows(len(keys), per_row, max_entries)
        out = cls(per_row, last, [SimpleBloomFilter.empty(bits, hashes) for _ in range(rows)])
        for idx, positions in bit_positions(keys, hashes, bits):
            if rows == 1:
                out.rows[0].bits[positions.ravel()] = True
                continue
            owner = row_of[idx]
            for r, row in enumerate(out.rows):
                row.bits[positions[:, owner == r].ravel()] = True
        return out

    def might_contain(self, keys: Keys) -> np.ndarray:
        first = self.rows[0]
        return probe(keys, first.num_hashes, first.num_bits, [row.bits for row in self.rows])

    def to_bytes(self) -> bytes:
        first = self.rows[0]
        return b"".join([_HEADER.pack(_VERSION, first.num_hashes, MURMUR_HASH, first.num_bits),
                         _DYNAMIC.pack(self.per_row, self.last_row_keys, len(self.rows)),
                         *(row.to_bytes() for row in self.rows)])

    @classmethod
    def from_bytes(cls, data: bytes) -> "DynamicBloomFilter":
        sizes, offset = _read_header(data, 0), _HEADER.size
        if len(data) < offset + _DYNAMIC.size:
            raise ValueError("DYNAMIC_V0 bloom filter truncated: no row count")
        per_row, last, count = _DYNAMIC.unpack_from(data, offset)
        if count <= 0:
            raise ValueError(f"DYNAMIC_V0 bloom filter with {count} rows")
        offset += _DYNAMIC.size
        rows = []
        for _ in range(count):
            row, offset = SimpleBloomFilter.read(data, offset)
            if (row.num_hashes, row.num_bits) != sizes:
                raise ValueError("DYNAMIC_V0 bloom filter rows of different sizes")
            rows.append(row)
        if offset != len(data):
            raise ValueError(f"{len(data) - offset} bytes after a DYNAMIC_V0 bloom filter")
        return cls(per_row, last, rows)

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")


def decode(encoded: str | bytes, type_code: str | None) -> RecordKeyFilter:
    """A stored filter back, by the type code stored beside it (Hudi's rule: none is SIMPLE;
    labformat's first layout has a type code of its own). ValueError names what is wrong."""
    kind = _type(type_code)
    if kind == LEGACY_TYPE:
        return LegacyBloomFilter.from_base64(encoded)
    if kind not in (SIMPLE, DYNAMIC_V0):
        raise ValueError(f"unknown bloom filter type code {type_code!r}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except ValueError as exc:
        raise ValueError(f"bloom filter is not base64: {exc}") from None
    return SimpleBloomFilter.from_bytes(data) if kind == SIMPLE else DynamicBloomFilter.from_bytes(data)
