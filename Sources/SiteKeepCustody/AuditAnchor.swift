#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Dispatch
import Synchronization
import SiteKeepKeyring

/// The audit log's head (sequence number and SHA-256 of the last line), anchored in the keyring
/// (item kind `audit-anchor`, id `head`), so that `sitekeep log verify` notices a log cut short
/// or rewritten from its genesis: a hash chain alone cannot.
///
/// Only a head that is on disk (after the log's fsync) is anchored, so a crash never leaves an
/// anchor ahead of the log. The anchor only moves forward: ``write(_:)`` holds an exclusive
/// `flock` on `audit.anchor.lock` in the home and stores the head only when it is past the
/// stored one, so a daemon and one-shot commands appending to one log keep one anchor. It needs
/// no key, so it is written while locked too.
///
/// **Cost.** A keyring write is a D-Bus round trip (Secret Service) or a rewrite of `keyring.v1`
/// with two fsyncs (file keyring), so appends never wait for one: ``advance(to:)`` hands the
/// latest durable head to a background writer that stores it at most once per ``interval``
/// (1 s by default). A clean stop stores it at once; a one-shot command stores it as it exits
/// unless the stored anchor is younger than ``interval`` (a script running commands back to back
/// pays for one write a second, not one per command).
///
/// **What stays undetected.** Lines appended after the last anchor write and before the next:
/// about one ``interval`` of lines (plus the fsync grouping) in a running daemon, the lines of
/// one-shot commands that ran within ``interval`` after the last anchor until another process
/// anchors, and everything since the last write of a process killed before it flushes. A
/// missing or damaged anchor of a store whose ``KeyringStateMarker`` says it has one is reported
/// by `log verify` and never silently re-created.
final class AuditAnchor: Sendable {
    /// The anchor's keyring item kind.
    static let itemKind = "audit-anchor"
    /// The lock file serialising anchor writes across processes.
    static let lockFileName = "audit.anchor.lock"

    /// A point in the chain: line `seq` hashes to `hash` (seq 0: the empty log, hash = genesis).
    struct Head: Equatable, Sendable {
        var seq: Int
        var hash: String
    }

    /// The stored anchor: a head and when it was written (wall-clock milliseconds).
    struct Record: Equatable, Sendable {
        var head: Head
        var writtenMs: Int64
    }

    /// What the keyring holds.
    enum Stored: Equatable, Sendable {
        case missing, damaged, record(Record)
    }

    let keyring: any KeyringBackend
    let item: KeyringItemID
    let lockPath: String
    let marker: KeyringStateMarker
    /// The longest a durable head waits before the background writer anchors it.
    let interval: Duration
    private let pending = Mutex<(target: Head?, scheduled: Bool, written: Int)>((nil, false, -1))

    init(keyring: any KeyringBackend, storeID: String, home: String, marker: KeyringStateMarker, interval: Duration = .seconds(1)) {
        self.keyring = keyring
        self.item = KeyringItemID(store: storeID, kind: Self.itemKind, id: "head")
        self.lockPath = home + "/" + Self.lockFileName
        self.marker = marker
        self.interval = interval
    }

    static func encode(_ r: Record) -> [UInt8] {
        Array("sitekeep-audit-anchor 1 \(r.head.seq) \(r.head.hash) \(r.writtenMs)\n".utf8)
    }

    static func parse(_ bytes: [UInt8]) -> Record? {
        let parts = String(decoding: bytes, as: UTF8.self).trimmingSpaces().split(separator: " ").map(String.init)
        guard parts.count == 5, parts[0] == "sitekeep-audit-anchor", parts[1] == "1",
              let seq = Int(parts[2]), seq >= 0, parts[3].utf8.count == 64,
              parts[3].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }),
              let written = Int64(parts[4]) else { return nil }
        return Record(head: Head(seq: seq, hash: parts[3]), writtenMs: written)
    }

    /// The stored anchor.
    func load() throws(CustodyError) -> Stored {
        do {
            return Self.parse(try keyring.load(item)).map { .record($0) } ?? .damaged
        } catch .itemMissing {
            return .missing
        } catch {
            throw .keyring(error)
        }
    }

    /// Stores `head` when it is past the stored anchor, unless the stored anchor was written
    /// less than `freshFor` ago (a one-shot command at exit: the lines it leaves are anchored by
    /// the next writer). A missing or damaged anchor is created only for a store not yet marked
    /// as having one (its creation, or the migration of an older store); otherwise it is left
    /// for `log verify` to report.
    func write(_ head: Head, unlessWrittenWithin freshFor: Duration? = nil) throws(CustodyError) {
        let now = AuditLog.wallClockMs()
        // Whether the keyring's anchor now covers `head` (stored here, or already past it).
        let covered = try Files.withExclusiveLock(lockPath) { () throws(CustodyError) -> Bool in
            switch try load() {
            case .record(let stored) where stored.head.seq >= head.seq: return true
            case .record(let stored):
                if let freshFor, now >= stored.writtenMs,
                   now - stored.writtenMs < Int64(PresenceProof.nanoseconds(freshFor) / 1_000_000) { return false }
            case .missing, .damaged: if marker.isPresent { return false }
            }
            do throws(KeyringError) {
                try keyring.store(Self.encode(Record(head: head, writtenMs: now)), for: item, label: "SiteKeep audit log anchor")
            } catch { throw .keyring(error) }
            return true
        }
        if covered { pending.withLock { $0.written = max($0.written, head.seq) } }
    }

    /// Hands the background writer a head that is on disk; it is anchored within ``interval``.
    func advance(to head: Head) {
        let schedule = pending.withLock { p -> Bool in
            guard head.seq > max(p.target?.seq ?? -1, p.written) else { return false }
            p.target = head
            if p.scheduled { return false }
            p.scheduled = true
            return true
        }
        guard schedule else { return }
        let ns = max(Int(PresenceProof.nanoseconds(interval)), 1_000_000)
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(ns)) { [self] in flush(with: nil) }
    }

    /// Anchors now, in one write, the later of `head` and the head the background writer is
    /// waiting with (see ``write(_:unlessWrittenWithin:)`` for `freshFor`).
    func flush(with head: Head? = nil, unlessWrittenWithin freshFor: Duration? = nil) {
        let target = pending.withLock { p -> Head? in
            defer { p.target = nil; p.scheduled = false }
            guard let waiting = p.target else { return head }
            guard let head else { return waiting }
            return head.seq >= waiting.seq ? head : waiting
        }
        if let target { try? write(target, unlessWrittenWithin: freshFor) }
    }
}
