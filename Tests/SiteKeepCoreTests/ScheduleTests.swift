import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport

struct HostileCase: Sendable, CustomTestStringConvertible {
    let name: String
    let document: JSONValue?
    let text: String?
    let path: String
    var testDescription: String { name }

    static func load(_ file: String) -> [HostileCase] {
        guard let data = try? Fixtures.data("core/\(file)"), let v = try? JSONParser.parse(Array(data)) else { return [] }
        return (v["cases"]?.arrayValue ?? []).map {
            HostileCase(name: $0["name"]?.stringValue ?? "?", document: $0["document"], text: $0["text"]?.stringValue, path: $0["path"]?.stringValue ?? "")
        }
    }
}

@Suite struct ScheduleTests {
    static let hostile = HostileCase.load("schedule-hostile.json")
    static let valid = HostileCase.load("schedule-valid.json")

    @Test func theCorporaAreThere() {
        #expect(Self.hostile.count >= 40, "Fixtures/core/schedule-hostile.json is missing or short: run Fixtures/tools/generate-core.py")
        #expect(Self.valid.count >= 5)
    }

    /// Every hostile document (wrong types, huge counts, duplicate ids, bad dates, broken JSON) is
    /// refused, and the refusal names the JSON path of the bad field.
    @Test(arguments: hostile) func hostileScheduleIsRefusedWithItsPath(_ c: HostileCase) throws {
        let document = c.document
        do throws(CoreFieldError) {
            if let text = c.text {
                _ = try ScheduleDocument(text: text)
            } else if let document {
                _ = try ScheduleDocument(json: document)
            }
            Issue.record("\(c.name) was accepted")
        } catch {
            #expect(error.path == c.path, "\(c.name): \(error)")
            #expect(error.description.hasPrefix(c.path + " "))
        }
    }

    @Test(arguments: valid) func validScheduleIsAcceptedAndRoundTrips(_ c: HostileCase) throws {
        let doc = try #require(c.document)
        let s = try ScheduleDocument(json: doc)
        #expect(s.picks.count == (doc["picks"]?.arrayValue?.count ?? -1))
        // Read back exactly as written: each `at` keeps its spelling.
        let again = try ScheduleDocument(json: s.json)
        #expect(again == s)
        let written = s.json["picks"]?.arrayValue ?? []
        for (i, original) in (doc["picks"]?.arrayValue ?? []).enumerated() {
            #expect(written[i]["at"] == original["at"], "\(c.name): picks[\(i)].at changed its spelling")
            #expect(written[i]["id"] == original["id"])
        }
    }

    @Test func theBridgeRootNamesArgs() {
        #expect(throws: CoreFieldError("args.picks[0].at", "(\"not a date\") is not an RFC 3339 date-time such as 2026-11-10T09:30:00Z or 2026-11-10T09:30:00+00:00")) {
            _ = try ScheduleDocument(json: ["v": 1, "picks": [["id": "a", "at": "not a date"]]], path: "args")
        }
    }

    @Test func atIsReadAsTheInstantItNames() throws {
        let s = try ScheduleDocument(json: ["v": 1, "picks": [["id": "a", "at": "2026-10-24T10:00:00.5+01:00"], ["id": "b", "at": 1_792_832_400_500]]])
        #expect(s.picks[0].at.instant == s.picks[1].at.instant)
        #expect(s.picks[0].at.instant.milliseconds == 1_792_832_400_500)
    }

    @Test func addAndRemoveKeepIdsUnique() throws {
        var s = ScheduleDocument()
        let added = try s.add(id: "ps26-cs-24-1000", at: Instant(milliseconds: 5)!)
        let again = try s.add(id: "ps26-cs-24-1000", at: Instant(milliseconds: 6)!)
        #expect(added && !again)
        #expect(s.picks.count == 1)
        #expect(throws: CoreFieldError.self) { try s.add(id: "", at: .earliest) }
        #expect(throws: CoreFieldError.self) { try s.add(id: "a\u{7}", at: .earliest) }
        let removed = s.remove(id: "ps26-cs-24-1000"), removedAgain = s.remove(id: "ps26-cs-24-1000")
        #expect(removed && !removedAgain)
        #expect(s.text == #"{"v":1,"picks":[]}"#)
    }

    @Test func idsCompareByteForByte() throws {
        // é composed and e + combining acute are one String to Swift, two ids to the page.
        let s = try ScheduleDocument(json: ["v": 1, "picks": [["id": "caf\u{e9}", "at": 1], ["id": "cafe\u{301}", "at": 2]]])
        #expect(s.picks.count == 2)
        var t = s
        let removed = t.remove(id: "cafe\u{301}")
        #expect(removed)
        #expect(t.picks.map { Array($0.id.utf8) } == [Array("caf\u{e9}".utf8)])
    }

    @Test func rfc3339KnownAnswers() throws {
        #expect(try Instant(rfc3339: "2026-10-25T01:05:00+00:00").milliseconds == 1_792_890_300_000)
        #expect(try Instant(rfc3339: "2026-03-29T01:05:00Z").milliseconds == 1_774_746_300_000)
        #expect(try Instant(rfc3339: "2000-02-29T12:00:00-03:30").milliseconds == 951_838_200_000)
        #expect(try Instant(rfc3339: "9999-12-31T23:59:59.999Z") == .latest)
        #expect(try Instant(rfc3339: "1970-01-01T00:00:00Z") == .earliest)
        #expect(Instant(milliseconds: 1_792_890_300_000)!.rfc3339 == "2026-10-25T01:05:00.000Z")
        #expect(throws: TimestampProblem.malformed) { try Instant(rfc3339: "2025-02-29T00:00:00Z") }
        #expect(throws: TimestampProblem.outOfRange) { try Instant(rfc3339: "1970-01-01T00:30:00+01:00") }
        #expect(try LocalDateTime(floating: "2026-10-25T01:30").hourMinute == "01:30")
    }
}
