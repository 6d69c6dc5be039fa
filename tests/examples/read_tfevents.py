#!/usr/bin/env python3
"""Reads a TensorBoard event file without TensorFlow or protobuf, from the format alone.

Each record: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the data,
uint32 masked CRC-32C of the data; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32).
The data is a tensorflow.Event: wall_time 1 (double), step 2 (int64), file_version 3
(string), summary 5 (Summary: repeated Value 1 {tag 1, simple_value 2 (float)}), session_log 6
(SessionLog: status 1). Prints one JSON object per event; exits 1 naming the first record whose
framing or checksum is wrong.

    read_tfevents.py FILE
"""
import json
import struct
import sys


def crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """(field number, wire type, value) of one protobuf message."""
    i = 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, buf[i:i + 8]
            i += 8
        elif wire == 2:
            n = varint()
            yield number, wire, buf[i:i + n]
            i += n
        elif wire == 5:
            yield number, wire, buf[i:i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    if i != len(buf):
        raise ValueError("message overruns its bytes")


def event(data):
    out = {"step": 0}
    for number, wire, value in fields(data):
        if (number, wire) == (1, 1):
            out["wall_time"] = struct.unpack("<d", value)[0]
        elif (number, wire) == (2, 0):
            out["step"] = value
        elif (number, wire) == (3, 2):
            out["file_version"] = value.decode()
        elif (number, wire) == (5, 2):
            scalars = {}
            for vn, vw, v in fields(value):
                assert (vn, vw) == (1, 2), (vn, vw)
                parts = {(n, w): x for n, w, x in fields(v)}
                scalars[parts[(1, 2)].decode()] = struct.unpack("<f", parts[(2, 5)])[0]
            out["scalars"] = scalars
        elif (number, wire) == (6, 2):
            out["session_log_status"] = dict(((n, w), x) for n, w, x in fields(value)).get((1, 0), 0)
        else:
            raise ValueError(f"unexpected Event field {number} (wire type {wire})")
    return out


def main(path):
    raw = open(path, "rb").read()
    at = index = 0
    while at < len(raw):
        if len(raw) - at < 12:
            sys.exit(f"record {index}: {len(raw) - at} bytes left, a header needs 12")
        header = raw[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", raw[at + 8:at + 12])
        if header_crc != masked(header):
            sys.exit(f"record {index}: length CRC {header_crc:#x}, expected {masked(header):#x}")
        data = raw[at + 12:at + 12 + length]
        if len(data) != length or at + 16 + length > len(raw):
            sys.exit(f"record {index}: truncated")
        (data_crc,) = struct.unpack("<I", raw[at + 12 + length:at + 16 + length])
        if data_crc != masked(data):
            sys.exit(f"record {index}: data CRC {data_crc:#x}, expected {masked(data):#x}")
        print(json.dumps(event(data)))
        at += 16 + length
        index += 1


if __name__ == "__main__":
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
    main(sys.argv[1])
