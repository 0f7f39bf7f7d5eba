import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport
import Synchronization

@Suite struct AgendaTests {
    /// The fixture (200 items in Europe/Lisbon across the end of summer time) parses, and every
    /// item starts at the instant Python's zoneinfo computed for it (`x-start-utc`).
    @Test func theFixtureAgendaParsesToTheInstantsZoneinfoComputed() throws {
        let agenda = try CoreFixtures.agenda()
        #expect(agenda.items.count == 200)
        #expect(agenda.zone.identifier == "Europe/Lisbon")
        #expect(agenda.items.filter { $0.kind == .standup }.count == 10)
        let raw = try CoreFixtures.agendaItems()
        #expect(raw.count == 200)
        for r in raw {
            let id = r["id"]?.stringValue ?? r["id"]?.intValue.map { String($0) } ?? ""
            let item = try #require(agenda.item(id: id), "item \(id) missing")
            let expected = try Instant(rfc3339: try #require(r["x-start-utc"]?.stringValue))
            #expect(item.start == expected, "\(id): \(item.start) != \(expected)")
        }
        // Sorted by start.
        #expect(zip(agenda.items, agenda.items.dropFirst()).allSatisfy { $0.start <= $1.start })
    }

    @Test func summerTimeEndIsReadAsRFC5545Says() throws {
        let a = try CoreFixtures.agenda()
        let across = try #require(a.item(id: "ps26-night-across"))
        // 00:30 WEST to 02:30 WET is three real hours.
        #expect(across.end.milliseconds - across.start.milliseconds == 3 * 3_600_000)
        // The ambiguous 01:30 is the first occurrence (WEST, 00:30Z)…
        #expect(try #require(a.item(id: "ps26-night-first-0130")).start == (try Instant(rfc3339: "2026-10-25T00:30:00Z")))
        // …and the repeated hour's second 01:05 is only sayable with an offset.
        let second = try #require(a.item(id: "ps26-night-second-0105"))
        #expect(second.start == (try Instant(rfc3339: "2026-10-25T01:05:00Z")))
        #expect(a.zone.isRepeatedWallClock(second.start))
        #expect(!a.zone.isRepeatedWallClock(across.start))
        // A wall-clock time in the spring gap uses the offset before it.
        let gap = try #require(CoreFixtures.lisbon.instant(for: try LocalDateTime(floating: "2026-03-29T01:30:00")))
        #expect(gap == (try Instant(rfc3339: "2026-03-29T01:30:00Z")))
    }

    @Test func aNumericIdIsReadAsItsDecimalText() throws {
        #expect(try CoreFixtures.agenda().item(id: "9001")?.title == "Numeric-id session")
    }

    @Test func picksTheAgendaLacksAreShownNotDropped() throws {
        let agenda = try CoreFixtures.agenda()
        let s = try CoreFixtures.schedule(["gone-2025-talk", "ps26-night-across", "ps26-su-24-0900"])
        let entries = s.entries(in: agenda)
        #expect(entries.count == 3)
        #expect(entries.map(\.pick.id) == ["ps26-su-24-0900", "ps26-night-across", "gone-2025-talk"])
        #expect(entries.last?.isKnownToAgenda == false)
        #expect(entries.last?.item == nil)
    }

    @Test func badAgendasAreRefusedWithThePath() throws {
        func refusal(_ v: JSONValue) -> String? {
            do { _ = try Agenda(json: v); return nil } catch { return error.path }
        }
        let ok: JSONValue = ["id": "a", "title": "T", "start": "2026-10-24T10:00:00Z"]
        #expect(refusal(["timezone": "Europe/Lisbon", "items": [ok]]) == nil)
        #expect(refusal(["timezone": "Mars/Olympus", "items": [ok]]) == "agenda.timezone")
        #expect(refusal(["items": "x"]) == "agenda.items")
        #expect(refusal(["items": [ok, ["title": "T", "start": "2026-10-24T10:00:00Z"]]]) == "agenda.items[1].id")
        #expect(refusal(["items": [ok, ok]]) == "agenda.items[1].id")
        #expect(refusal(["items": [["id": "a", "title": "T", "start": "tomorrow"]]]) == "agenda.items[0].start")
        #expect(refusal(["items": [["id": "a", "title": "T", "start": "2026-10-24T10:00:00Z", "end": "2026-10-24T09:00:00Z"]]]) == "agenda.items[0].end")
        #expect(refusal(["items": [["id": "a", "title": "T", "start": "2026-10-24T10:00:00Z", "kind": "party"]]]) == "agenda.items[0].kind")
        #expect(refusal(["items": [["id": "a", "title": "T", "start": "2026-10-24T10:00:00Z", "url": "javascript:alert(1)"]]]) == "agenda.items[0].url")
        #expect(refusal(["items": [["id": "a", "title": "T\u{0}", "start": "2026-10-24T10:00:00Z"]]]) == "agenda.items[0].title")
        #expect(refusal(["sessions": [ok]]) == nil)
        #expect(refusal([ok]) == nil)
    }

    @Test func theAgendaFileIsTheOneNamedAgenda() {
        #expect(AgendaLoader.agendaFile(in: ["people.json", "promptugal-agenda-2026.json", "agenda.csv", "search.json"]) == "promptugal-agenda-2026.json")
        #expect(AgendaLoader.agendaFile(in: ["people.json"]) == nil)
    }
}

/// The loader against a cache and a fetcher that count what they are asked.
@Suite struct AgendaLoaderTests {
    final class MemoryCache: AgendaCache {
        private let value = Mutex<CachedAgenda?>(nil)
        func current() throws(AgendaError) -> CachedAgenda? { value.withLock { $0 } }
        func store(_ agenda: CachedAgenda) throws(AgendaError) { value.withLock { $0 = agenda } }
    }
    final class ScriptedFetcher: AgendaFetcher {
        private let state: Mutex<(answers: [Result<AgendaFetchResult, AgendaError>], asked: [String?])>
        init(_ answers: [Result<AgendaFetchResult, AgendaError>]) { state = Mutex((answers, [])) }
        var asked: [String?] { state.withLock { $0.asked } }
        func fetch(url: String, ifNoneMatch etag: String?) async throws(AgendaError) -> AgendaFetchResult {
            let next = state.withLock { s -> Result<AgendaFetchResult, AgendaError> in
                s.asked.append(etag)
                return s.answers.removeFirst()
            }
            return try next.get()
        }
    }

    @Test func refreshSendsTheETagAndKeepsTheCacheOnNotModifiedAndOnFailure() async throws {
        let body = try CoreFixtures.agendaBytes()
        let url = "https://promptugal.news/api/v1/agenda.json"
        let fetcher = ScriptedFetcher([.success(.fetched(body: body, etag: "\"v1\"")), .success(.notModified),
                                       .failure(.fetchFailed("connection refused")), .success(.fetched(body: Array("{\"items\":7}".utf8), etag: "\"bad\""))])
        let loader = AgendaLoader(cache: MemoryCache(), fetcher: fetcher)
        let (a1, r1) = try await loader.refresh(url: url, now: .earliest)
        #expect(r1 == .updated && a1.items.count == 200)
        let (a2, r2) = try await loader.refresh(url: url, now: .earliest)
        #expect(r2 == .notModified && a2 == a1)
        let (a3, r3) = try await loader.refresh(url: url, now: .earliest)
        #expect(a3 == a1)
        if case .stale = r3 {} else { Issue.record("a failed fetch should answer the cached agenda as stale") }
        // An agenda that does not validate never replaces the cached one.
        await #expect(throws: AgendaError.self) { try await loader.refresh(url: url, now: .earliest) }
        #expect(try loader.current() == a1)
        #expect(fetcher.asked == [nil, "\"v1\"", "\"v1\"", "\"v1\""])
    }

    @Test func nothingLoadedIsAClearError() throws {
        let loader = AgendaLoader(cache: MemoryCache())
        #expect(throws: AgendaError.notLoaded) { try loader.current() }
        #expect(try loader.currentOrEmpty().items.isEmpty)
    }
}
