import Foundation
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport
import Synchronization

/// A clock the test moves by hand.
final class ManualClock: CoreClock {
    private let current: Mutex<Instant>
    init(_ start: Instant) { current = Mutex(start) }
    init(_ rfc3339: String) throws { current = Mutex(try Instant(rfc3339: rfc3339)) }
    func now() -> Instant { current.withLock { $0 } }
    func set(_ i: Instant) { current.withLock { $0 = i } }
    func set(_ rfc3339: String) throws { let i = try Instant(rfc3339: rfc3339); set(i) }
    func advance(minutes: Int64) { current.withLock { $0 = $0.adding(milliseconds: minutes * 60_000) } }
}

/// Keeps every notification it is given.
final class RecordingSink: NotificationSink {
    private let shown = Mutex<[DesktopNotification]>([])
    private let failing: Bool
    init(failing: Bool = false) { self.failing = failing }
    func deliver(_ n: DesktopNotification) throws(DeliveryError) {
        if failing { throw DeliveryError("no notification service") }
        shown.withLock { $0.append(n) }
    }
    var notifications: [DesktopNotification] { shown.withLock { $0 } }
}

enum CoreFixtures {
    static func agendaBytes() throws -> [UInt8] { Array(try Fixtures.data("core/promptugal-agenda-2026.json")) }
    static func agenda() throws -> Agenda { try Agenda(text: agendaBytes()) }
    /// The fixture's items as JSON (with the generator's expected `x-start-utc`).
    static func agendaItems() throws -> [JSONValue] {
        try JSONParser.parse(agendaBytes())["items"]?.arrayValue ?? []
    }
    static let lisbon = ZoneRules(identifier: "Europe/Lisbon")!

    /// A one-off agenda in Lisbon from (id, wall-clock or RFC 3339 start, minutes, kind).
    static func lisbonAgenda(_ items: [(String, String, Int, AgendaItemKind)]) throws -> Agenda {
        let list: [JSONValue] = try items.map { id, start, minutes, kind in
            let s: Instant
            if let i = try? Instant(rfc3339: start) { s = i } else {
                guard let i = lisbon.instant(for: try LocalDateTime(floating: start)) else { throw CoreFieldError("start", "unresolvable") }
                s = i
            }
            return .object([JSONMember(key: "id", value: .string(id)), JSONMember(key: "title", value: .string("Session \(id)")),
                            JSONMember(key: "stage", value: "Centre Stage"), JSONMember(key: "start", value: .string(s.rfc3339)),
                            JSONMember(key: "end", value: .string(s.adding(milliseconds: Int64(minutes) * 60_000).rfc3339)),
                            JSONMember(key: "kind", value: .string(kind.rawValue)),
                            JSONMember(key: "url", value: .string("https://promptugal.news/agenda/\(id)/"))])
        }
        return try Agenda(json: .object([JSONMember(key: "timezone", value: "Europe/Lisbon"), JSONMember(key: "items", value: .array(list))]))
    }

    static func schedule(_ ids: [String], at: Int64 = 1_790_000_000_000) throws -> ScheduleDocument {
        var s = ScheduleDocument()
        for (i, id) in ids.enumerated() { try s.add(id: id, at: Instant(milliseconds: at + Int64(i))!) }
        return s
    }
}

/// Runs a shell line (fixed text built by the test, paths quoted) and returns its status and
/// standard output.
enum Shell {
    static func run(_ line: String) throws -> (status: Int32, output: String) {
        let dir = try Fixtures.temporaryDirectory("sitekeep-shell")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out").path
        let status = ChildProcess.run("/bin/sh", ["-c", "(\(line)) > '\(out)' 2>&1"])
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
    }

    /// The package's virtualenv Python (tools/setup makes it).
    static var venvPython: String? {
        guard let root = try? Fixtures.packageRoot() else { return nil }
        let p = root.appendingPathComponent(".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: p) ? p : nil
    }

    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
