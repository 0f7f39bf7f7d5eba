#!/usr/bin/env python3
"""Writes the native core's fixtures (deterministic; no randomness):

  Fixtures/core/promptugal-agenda-2026.json   a realistic agenda of 200 items in Europe/Lisbon,
                                              23-27 October 2026, across the end of summer time
                                              (25 October, 02:00 WEST -> 01:00 WET)
  Fixtures/core/schedule-hostile.json         nr.schedule.v1 documents that must be refused,
                                              each with the JSON path the refusal must name
  Fixtures/core/schedule-valid.json           documents that must be accepted

Times are checked here against Python's zoneinfo (an implementation independent of the Swift
code under test) and each item carries its expected UTC start as `x-start-utc`.

  python3 Fixtures/tools/generate-core.py
"""
import json, os
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core")
LIS = ZoneInfo("Europe/Lisbon")
STAGES = ["Centre Stage", "Builders Stage", "Newsroom Stage", "Policy Stage", "Workshop Room A", "Workshop Room B"]
TOPICS = ["Agents in the newsroom", "Sealed vaults for readers", "Passkeys everywhere", "The browser for one",
          "Local-first sync", "Open data for agendas", "Reading meters that respect you", "Ask, with your own key",
          "Summits without apps", "Notifications that matter", "Calendars, done right", "The vault as truth",
          "Small models, big briefs", "Fact-checking at speed", "Portugal's startup map", "Design for one hand"]


def iso_local(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S")


def utc(dt):
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def agenda():
    items = []
    n = 0
    for day in range(23, 28):
        # Two stand-ups a day: the morning newsroom stand-up and the evening team one.
        for (h, m, title) in [(9, 0, "Newsroom stand-up"), (17, 30, "Summit team stand-up")]:
            s = datetime(2026, 10, day, h, m, tzinfo=LIS)
            items.append({"id": f"ps26-su-{day}-{h:02d}{m:02d}", "title": title, "stage": "Meeting room 2", "kind": "standup",
                          "start": iso_local(s), "end": iso_local(s + timedelta(minutes=15)),
                          "url": f"https://web-summit.sgit.ai/meetings/2026-10-{day}-{h:02d}{m:02d}/",
                          "x-start-utc": utc(s)})
        # Sessions every 30 minutes from 10:00 on six stages, until the day has its share.
        slots = [(10 + k // 2, 30 * (k % 2)) for k in range(14)]
        for k, (h, m) in enumerate(slots):
            for si, stage in enumerate(STAGES):
                if len(items) >= 200 - (27 - day) * 38 - 4:
                    break
                if (k + si + day) % 3 == 0:
                    continue
                n += 1
                s = datetime(2026, 10, day, h, m, tzinfo=LIS)
                dur = 25 if si < 4 else 55
                e = s + timedelta(minutes=dur)
                code = "".join(w[0] for w in stage.lower().split())
                item = {"id": f"ps26-{code}-{day}-{h:02d}{m:02d}", "title": f"{TOPICS[(n + si) % len(TOPICS)]} ({stage.split()[0]} {k + 1})",
                        "stage": stage, "start": iso_local(s), "end": iso_local(e),
                        "url": f"https://promptugal.news/agenda/ps26-{code}-{day}-{h:02d}{m:02d}/", "speakers": [f"Speaker {n}"],
                        "x-start-utc": utc(s)}
                if n % 7 == 0:   # some items give offsets instead of wall-clock times, as feeds do
                    item["start"] = s.isoformat()
                    item["end"] = e.isoformat()
                items.append(item)
    # The night summer time ends (25 October 2026, 02:00 WEST -> 01:00 WET): sessions across it.
    first_0130 = datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc)          # 01:30 WEST
    second_0105 = datetime(2026, 10, 25, 1, 5, tzinfo=timezone.utc)          # 01:05 WET (the repeated hour)
    night = [
        {"id": "ps26-night-across", "title": "Late-night newsroom: the clocks go back", "stage": "Newsroom Stage",
         "start": "2026-10-25T00:30:00", "end": "2026-10-25T02:30:00", "x-start-utc": "2026-10-24T23:30:00Z",
         "x-note": "wall clock 00:30 WEST to 02:30 WET: three real hours"},
        {"id": "ps26-night-first-0130", "title": "Radio hour (first 01:30)", "stage": "Newsroom Stage",
         "start": "2026-10-25T01:30:00", "end": "2026-10-25T01:50:00", "x-start-utc": utc(first_0130),
         "x-note": "ambiguous wall clock: RFC 5545 reads it as the first occurrence (WEST)"},
        {"id": "ps26-night-second-0105", "title": "Radio hour (second 01:05)", "stage": "Newsroom Stage",
         "start": "2026-10-25T01:05:00+00:00", "end": "2026-10-25T01:45:00+00:00", "x-start-utc": utc(second_0105),
         "x-note": "the repeated hour, second occurrence: only an offset can say it"},
        {"id": 9001, "title": "Numeric-id session", "stage": "Centre Stage",
         "start": "2026-10-26T19:00:00", "end": "2026-10-26T19:45:00", "x-start-utc": "2026-10-26T19:00:00Z"},
    ]
    items = items[: 200 - len(night)] + night
    for it in items:  # cross-check every expected instant with zoneinfo
        if isinstance(it["start"], str) and len(it["start"]) == 19:
            got = datetime.fromisoformat(it["start"]).replace(tzinfo=LIS, fold=0)
            assert utc(got) == it["x-start-utc"], it
    assert len(items) == 200, len(items)
    return {"source": "Fixtures/tools/generate-core.py (a realistic agenda in the shape docs/CORE.md describes)",
            "site": "https://promptugal.news", "timezone": "Europe/Lisbon", "generated": "2026-10-01T00:00:00Z", "items": items}


def hostile():
    ok_pick = {"id": "ps26-cs-24-1000", "at": 1793000000000}
    big = {"v": 1, "picks": [{"id": f"p{i}", "at": 1793000000000 + i} for i in range(1001)]}
    cases = [
        ("not an object", [], "schedule"),
        ("a string", "v1", "schedule"),
        ("null", None, "schedule"),
        ("v missing", {"picks": []}, "schedule.v"),
        ("v as a string", {"v": "1", "picks": []}, "schedule.v"),
        ("v as a number with fraction", {"v": 1.0, "picks": []}, "schedule.v"),
        ("v is 2", {"v": 2, "picks": []}, "schedule.v"),
        ("v is true", {"v": True, "picks": []}, "schedule.v"),
        ("picks missing", {"v": 1}, "schedule.picks"),
        ("picks an object", {"v": 1, "picks": {"0": ok_pick}}, "schedule.picks"),
        ("picks null", {"v": 1, "picks": None}, "schedule.picks"),
        ("unknown top-level field", {"v": 1, "picks": [], "admin": True}, "schedule.admin"),
        ("a pick that is a string", {"v": 1, "picks": ["ps26-cs-24-1000"]}, "schedule.picks[0]"),
        ("a pick that is an array", {"v": 1, "picks": [ok_pick, ["id", "at"]]}, "schedule.picks[1]"),
        ("id missing", {"v": 1, "picks": [{"at": 1}]}, "schedule.picks[0].id"),
        ("id a number", {"v": 1, "picks": [{"id": 42, "at": 1}]}, "schedule.picks[0].id"),
        ("id null", {"v": 1, "picks": [{"id": None, "at": 1}]}, "schedule.picks[0].id"),
        ("id empty", {"v": 1, "picks": [ok_pick, {"id": "", "at": 1}]}, "schedule.picks[1].id"),
        ("id too long", {"v": 1, "picks": [{"id": "x" * 129, "at": 1}]}, "schedule.picks[0].id"),
        ("id with a newline", {"v": 1, "picks": [{"id": "a\nBEGIN:VEVENT", "at": 1}]}, "schedule.picks[0].id"),
        ("id with NUL", {"v": 1, "picks": [{"id": "a\u0000b", "at": 1}]}, "schedule.picks[0].id"),
        ("at missing", {"v": 1, "picks": [{"id": "a"}]}, "schedule.picks[0].at"),
        ("at not a date", {"v": 1, "picks": [{"id": "a", "at": "not a date"}]}, "schedule.picks[0].at"),
        ("at negative", {"v": 1, "picks": [{"id": "a", "at": -1}]}, "schedule.picks[0].at"),
        ("at past year 9999", {"v": 1, "picks": [{"id": "a", "at": 253402300800000}]}, "schedule.picks[0].at"),
        ("at with a fraction", {"v": 1, "picks": [{"id": "a", "at": 1793000000000.5}]}, "schedule.picks[0].at"),
        ("at huge", {"v": 1, "picks": [{"id": "a", "at": 1e300}]}, "schedule.picks[0].at"),
        ("at a boolean", {"v": 1, "picks": [{"id": "a", "at": True}]}, "schedule.picks[0].at"),
        ("at an object", {"v": 1, "picks": [{"id": "a", "at": {"$date": 1}}]}, "schedule.picks[0].at"),
        ("at RFC 3339 without offset", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24T10:00:00"}]}, "schedule.picks[0].at"),
        ("at with a space for T", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24 10:00:00Z"}]}, "schedule.picks[0].at"),
        ("at 31 February", {"v": 1, "picks": [{"id": "a", "at": "2026-02-31T10:00:00Z"}]}, "schedule.picks[0].at"),
        ("at hour 24", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24T24:00:00Z"}]}, "schedule.picks[0].at"),
        ("at a leap second", {"v": 1, "picks": [{"id": "a", "at": "2016-12-31T23:59:60Z"}]}, "schedule.picks[0].at"),
        ("at offset without colon", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24T10:00:00+0100"}]}, "schedule.picks[0].at"),
        ("at ten fraction digits", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24T10:00:00.1234567890Z"}]}, "schedule.picks[0].at"),
        ("at a long string", {"v": 1, "picks": [{"id": "a", "at": "2026-10-24T10:00:00" + "0" * 100 + "Z"}]}, "schedule.picks[0].at"),
        ("at before 1970", {"v": 1, "picks": [{"id": "a", "at": "1969-12-31T23:59:59Z"}]}, "schedule.picks[0].at"),
        ("unknown pick field", {"v": 1, "picks": [{"id": "a", "at": 1, "note": "x"}]}, "schedule.picks[0].note"),
        ("duplicate ids", {"v": 1, "picks": [{"id": "a", "at": 1}, {"id": "b", "at": 2}, {"id": "a", "at": 3}]}, "schedule.picks[2].id"),
        ("1001 picks", big, "schedule.picks"),
    ]
    texts = [
        ("truncated JSON", '{"v":1,"picks":[', "schedule"),
        ("trailing comma", '{"v":1,"picks":[],}', "schedule"),
        ("duplicate key", '{"v":1,"v":1,"picks":[]}', "schedule"),
        ("comment", '{"v":1,"picks":[]} // mine', "schedule"),
        ("lone surrogate", '{"v":1,"picks":[{"id":"\\ud800","at":1}]}', "schedule"),
    ]
    out = [{"name": n, "document": d, "path": p} for (n, d, p) in cases]
    out += [{"name": n, "text": t, "path": p} for (n, t, p) in texts]
    return {"source": "Fixtures/tools/generate-core.py: each case must be refused naming `path`", "cases": out}


def valid():
    return {"source": "Fixtures/tools/generate-core.py: each case must be accepted",
            "cases": [
                {"name": "empty", "document": {"v": 1, "picks": []}},
                {"name": "milliseconds", "document": {"v": 1, "picks": [{"id": "ps26-cs-24-1000", "at": 1793000000000}]}},
                {"name": "RFC 3339 forms", "document": {"v": 1, "picks": [
                    {"id": "a", "at": "2026-10-24T10:00:00Z"}, {"id": "b", "at": "2026-10-24T10:00:00.5+01:00"},
                    {"id": "c", "at": "2026-10-24t10:00:00.123456789z"}, {"id": "d", "at": "2026-10-24T10:00:00-03:30"}]}},
                {"name": "members in the other order", "document": {"picks": [{"at": 1, "id": "x"}], "v": 1}},
                {"name": "unicode ids distinct by bytes", "document": {"v": 1, "picks": [{"id": "caf\u00e9", "at": 1}, {"id": "cafe\u0301", "at": 2}]}},
                {"name": "1000 picks", "document": {"v": 1, "picks": [{"id": f"p{i}", "at": i} for i in range(1000)]}},
            ]}


os.makedirs(OUT, exist_ok=True)
for name, doc in [("promptugal-agenda-2026.json", agenda()), ("schedule-hostile.json", hostile()), ("schedule-valid.json", valid())]:
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", name)
