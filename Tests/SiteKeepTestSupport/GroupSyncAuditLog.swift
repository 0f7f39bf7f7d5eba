import Glibc
import Foundation
import SiteKeepSocket
import Synchronization
public import SiteKeepBridge
import SiteKeepJSON
import SiteKeepSystem

/// An append-only audit file for signing: each line is written (`write(2)`) before
/// ``append(_:)`` returns, and a background thread makes them durable with one `fdatasync` per
/// group (at most `syncInterval` later). ``flush()`` syncs now; ``close()`` syncs and closes.
///
/// Custody owns the real, hash-chained audit log; this one stands in for it in the test daemon
/// (`sitekeep-bridge-testd`), with the same ordering rule. The `key.sign` benchmark uses custody's.
public final class GroupSyncAuditLog: SigningAuditSink {
    private struct State {
        var fd: Int32
        var dirty = false
        var closed = false
    }
    private let state: Mutex<State>
    /// Held across each fdatasync and by close, so the fd is never closed under a sync while
    /// appends (which take only `state`) go on.
    private let syncing = Mutex(())
    private let stop = Atomic<Bool>(false)
    private let syncerDone = DispatchSemaphore(value: 0)

    /// Opens (creates, 0600) `path` for appending and starts the syncer.
    public init(path: String, syncInterval: Duration = .milliseconds(5)) throws(BridgeError) {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .socket(call: "open(\(path))", errno: errno) }
        state = Mutex(State(fd: fd))
        let micros = UInt32(max(100, syncInterval.components.seconds * 1_000_000 + syncInterval.components.attoseconds / 1_000_000_000_000))
        Thread.detachNewThread { [self] in
            while !stop.load(ordering: .acquiring) {
                usleep(micros)
                flush()
            }
            syncerDone.signal()
        }
    }

    public func append(_ entry: SigningAuditEntry) throws(BridgeFailure) {
        let line = JSONSerializer.bytes([
            "t": .integer(Int64(Date().timeIntervalSince1970 * 1000)), "site": .string(entry.site), "op": "key.sign",
            "key": .string(entry.keyID), "ok": .bool(entry.ok), "presenceAgeMs": .integer(entry.presenceAgeMilliseconds),
        ]) + [0x0a]
        let ok = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.dirty = true
            do { try FileIO.writeAll(s.fd, line) } catch { return false }
            return true
        }
        guard ok else { throw BridgeFailure(.internal, "the audit log could not be written; nothing was signed") }
    }

    /// Makes every written line durable now.
    public func flush() {
        syncing.withLock { _ in
            let fd = state.withLock { s -> Int32? in
                guard s.dirty, !s.closed else { return nil }
                s.dirty = false
                return s.fd
            }
            if let fd { _ = fdatasync(fd) }
        }
    }

    /// Syncs, stops the syncer and closes the file. Later appends fail.
    public func close() {
        if !stop.exchange(true, ordering: .acquiringAndReleasing) { syncerDone.wait() }
        flush()
        syncing.withLock { _ in
            state.withLock { s in
                guard !s.closed else { return }
                s.closed = true
                Glibc.close(s.fd)
            }
        }
    }
}
