"""Length-prefixed frames on pipes (stdlib only): what the worker, the judge and the in-sandbox
program process exchange. A frame is an 8-byte little-endian length and that many bytes; a reader
gets None when the other end closed (or died) before a whole frame arrived."""

import os
import struct

HEADER = struct.Struct("<Q")


def read_exact(fd, n):
    """Exactly `n` bytes from `fd`, or None at end of file (or on a read error)."""
    chunks = []
    while n:
        try:
            chunk = os.read(fd, min(n, 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd, cap=None):
    """One frame's bytes (None at end of file, or when it announces more than `cap` bytes)."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    size = HEADER.unpack(head)[0]
    if cap is not None and size > cap:
        return None
    return read_exact(fd, size)


def write_frame(fd, data):
    """Write `data` as one frame (blocking until all of it is written)."""
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]
