"""Thrift's compact protocol read into plain values, with where each string sits.

Parquet writes its footer and every page header as Thrift compact structs.  pyarrow
reads them but does not say where a field's bytes are in the file, and
:mod:`app.parquet_files` needs exactly that: which bytes of a small file are its values
and its statistics, so that a later file of the same layout is read from those places.
This reader is for that learning only (a few hundred microseconds for a 30-column
footer); it is not on any request's way once a layout is known.

A struct becomes a dict from field id to value; a list or set a list; a map a list of
pairs; a string or binary the :class:`Span` of its bytes; integers ints (zigzag undone);
booleans bools; doubles floats.  Anything malformed raises :class:`ThriftError`.
"""

from __future__ import annotations

import struct
from typing import Any, Final, NamedTuple

__all__ = ["Span", "ThriftError", "read_struct", "read_varint"]

_MAX_DEPTH: Final = 32  # Parquet's structs nest five deep


class ThriftError(ValueError):
    """The bytes are not a compact-protocol struct."""


class Span(NamedTuple):
    """Where a binary field's bytes are: ``buffer[start:end]``."""

    start: int
    end: int


def read_struct(buffer: bytes, pos: int = 0) -> tuple[dict[int, Any], int]:
    """The struct that starts at ``pos``, and where it ends."""
    try:
        return _Reader(buffer).struct(pos, 0)
    except IndexError:
        raise ThriftError(f"a struct at byte {pos} runs past the end") from None


def read_varint(buffer: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint (LEB128, as snappy's length too) at ``pos``, and its end."""
    try:
        return _Reader(buffer).varint(pos)
    except IndexError:
        raise ThriftError(f"a varint at byte {pos} runs past the end") from None


class _Reader:
    def __init__(self, buffer: bytes) -> None:
        self.buffer = buffer

    def varint(self, pos: int) -> tuple[int, int]:
        buffer, value, shift = self.buffer, 0, 0
        while True:
            byte = buffer[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos
            shift += 7
            if shift > 63:
                raise ThriftError(f"a varint longer than 64 bits ends at byte {pos}")

    def integer(self, pos: int) -> tuple[int, int]:
        raw, pos = self.varint(pos)
        return (raw >> 1) ^ -(raw & 1), pos

    def struct(self, pos: int, depth: int) -> tuple[dict[int, Any], int]:
        if depth > _MAX_DEPTH:
            raise ThriftError(f"structs nested deeper than {_MAX_DEPTH} at byte {pos}")
        fields: dict[int, Any] = {}
        field_id = 0
        while True:
            header = self.buffer[pos]
            pos += 1
            if header == 0:
                return fields, pos
            kind, delta = header & 0x0F, header >> 4
            if delta:
                field_id += delta
            else:
                field_id, pos = self.integer(pos)
            fields[field_id], pos = self.value(pos, kind, depth)

    def value(self, pos: int, kind: int, depth: int) -> tuple[Any, int]:
        if kind == 1 or kind == 2:  # a struct's boolean: the type is the value
            return kind == 1, pos
        if kind == 3:
            byte = self.buffer[pos]
            return byte - 256 if byte > 127 else byte, pos + 1
        if 4 <= kind <= 6:
            return self.integer(pos)
        if kind == 7:
            if pos + 8 > len(self.buffer):
                raise IndexError
            return struct.unpack_from("<d", self.buffer, pos)[0], pos + 8
        if kind == 8:
            size, start = self.varint(pos)
            if start + size > len(self.buffer):
                raise IndexError
            return Span(start, start + size), start + size
        if kind == 9 or kind == 10:
            return self.items(pos, depth)
        if kind == 11:
            return self.pairs(pos, depth)
        if kind == 12:
            return self.struct(pos, depth + 1)
        raise ThriftError(f"unknown compact type {kind} at byte {pos}")

    def element(self, pos: int, kind: int, depth: int) -> tuple[Any, int]:
        """A value of a list, set or map, where a boolean is a byte of its own."""
        if kind == 1 or kind == 2:
            return self.buffer[pos] == 1, pos + 1
        return self.value(pos, kind, depth)

    def items(self, pos: int, depth: int) -> tuple[list[Any], int]:
        header = self.buffer[pos]
        pos += 1
        size, kind = header >> 4, header & 0x0F
        if size == 15:
            size, pos = self.varint(pos)
        items: list[Any] = []
        for _ in range(size):
            item, pos = self.element(pos, kind, depth + 1)
            items.append(item)
        return items, pos

    def pairs(self, pos: int, depth: int) -> tuple[list[tuple[Any, Any]], int]:
        size, pos = self.varint(pos)
        if not size:
            return [], pos
        kinds = self.buffer[pos]
        pos += 1
        pairs: list[tuple[Any, Any]] = []
        for _ in range(size):
            key, pos = self.element(pos, kinds >> 4, depth + 1)
            value, pos = self.element(pos, kinds & 0x0F, depth + 1)
            pairs.append((key, value))
        return pairs, pos
