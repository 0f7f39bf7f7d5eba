#!/usr/bin/env python3
"""The colours of a PNG screenshot, for the browser's process tests (standard library only).

argv: PNG [STEP]. Reads an 8-bit, non-interlaced PNG (greyscale, RGB, RGBA, grey+alpha; what
GTK's snapshots write), undoes the row filters, quantizes each pixel's RGB to multiples of
STEP (default 8) and prints one JSON object: {"width", "height", "colours": {"r,g,b": fraction}}
with every quantized colour that covers at least 0.1 % of the image. Exits 2, naming what was
wrong, on a file it cannot read.
"""
import json, struct, sys, zlib


def fail(why):
    print(f"png_colours: {why}", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) not in (2, 3):
        fail("usage: png_colours.py PNG [STEP]")
    step = int(sys.argv[2]) if len(sys.argv) == 3 else 8
    data = open(sys.argv[1], "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{sys.argv[1]} is not a PNG")
    at, idat, header = 8, b"", None
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        at += 12 + length
    if header is None:
        fail("no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        fail(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    counts = {}
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        for x in range(0, stride, channels):
            rgb = (line[x], line[x], line[x]) if channels < 3 else (line[x], line[x + 1], line[x + 2])
            key = ",".join(str(v // step * step) for v in rgb)
            counts[key] = counts.get(key, 0) + 1
        previous = line
    total = width * height
    print(json.dumps({"width": width, "height": height,
                      "colours": {k: round(v / total, 5) for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if v / total >= 0.001}}))


main()
