#!/usr/bin/env python3
"""Sorts ThreadSanitizer reports in a log: those whose two racing accesses both run inside a
`Mutex.withLock` body (a non-escaping closure taking the state `inout`, typed throws: mangled
`...z...YTXEfU<n>_`) and the rest. Prints `<total> <inside-withLock>` and, on stderr, the first
frames of every report that is NOT inside withLock (those are real findings)."""
import re, sys

log = open(sys.argv[1], errors="replace").read()
reports = [b for b in log.split("==================") if "WARNING: ThreadSanitizer" in b]
body = re.compile(r"z\w*YTXEfU\d*_")
inside = 0
for r in reports:
    sections = [s for s in r.strip("\n").split("\n\n") if s.strip()]
    accesses = sections[:2]
    def in_lock(section):
        return any(body.search(m.group(1)) for m in re.finditer(r"#\d+ (\S+)", section))
    if len(accesses) == 2 and all(in_lock(s) for s in accesses):
        inside += 1
    else:
        sys.stderr.write("TSan report outside any withLock body:\n" + "\n".join(r.strip().split("\n")[:8]) + "\n\n")
print(len(reports), inside)
