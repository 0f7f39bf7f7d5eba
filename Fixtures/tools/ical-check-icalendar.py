#!/usr/bin/env python3
"""ical-check-icalendar: reads an RFC 5545 file with the `icalendar` package (PyPI) and prints the
same JSON as ical-check-libical.c: {"errors": [...], "events": [{uid, summary, location, start,
end, sequence, trigger}]}, times in seconds since the epoch, UTC.

The errors are those icalendar records on each component while parsing (`component.errors`),
plus lines longer than 75 octets (RFC 5545 §3.1) and lines not ended by CRLF.

  .venv/bin/python Fixtures/tools/ical-check-icalendar.py FILE.ics
"""
import json, sys
from datetime import datetime, timezone

import icalendar

raw = open(sys.argv[1], "rb").read()
errors = []
lines = raw.split(b"\r\n")
if lines and lines[-1] == b"":
    lines = lines[:-1]
else:
    errors.append({"in": "file", "error": "the last line is not ended by CRLF"})
for i, line in enumerate(lines):
    if b"\n" in line or b"\r" in line:
        errors.append({"in": "file", "error": f"line {i + 1} has a bare LF or CR"})
    if len(line) > 75:
        errors.append({"in": "file", "error": f"line {i + 1} is {len(line)} octets long"})

cal = icalendar.Calendar.from_ical(raw)
for c in cal.walk():
    for e in getattr(c, "errors", []):
        errors.append({"in": c.name, "error": str(e)})


def seconds(v):
    dt = v.dt
    if not isinstance(dt, datetime):
        raise SystemExit(f"not a date-time: {v!r}")
    if dt.tzinfo is None:
        raise SystemExit(f"a floating time: {v!r}")
    return int(dt.astimezone(timezone.utc).timestamp())


events = []
for ev in cal.walk("VEVENT"):
    trigger = None
    for alarm in ev.walk("VALARM"):
        trigger = int(alarm["TRIGGER"].dt.total_seconds())
        break
    events.append({"uid": str(ev["UID"]), "summary": str(ev.get("SUMMARY", "")), "location": str(ev.get("LOCATION", "")),
                   "start": seconds(ev["DTSTART"]), "end": seconds(ev["DTEND"]), "sequence": int(ev.get("SEQUENCE", 0)),
                   "trigger": trigger})
print(json.dumps({"errors": errors, "events": events}))
