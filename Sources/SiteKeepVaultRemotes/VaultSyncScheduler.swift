public import SiteKeepVault
import SiteKeepSystem
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the last background sync of one vault did, for `vault.status`.
public struct VaultSyncState: Sendable, Equatable {
    /// When the last round for this vault ended (ms since the epoch), nil before the first.
    public var lastSyncMs: Int64?
    /// Its error, nil when it succeeded.
    public var lastError: String?
    /// Pushes still queued (durable, `PushQueue`).
    public var queued: Int
    /// Paths in conflict since the last merge (`merge_state.json`).
    public var conflicts: [String]
}

/// The daemon's periodic sync (issue 14, item 7): on its own thread, every `interval` while
/// custody is unlocked, and at once when it becomes unlocked, each vault that has a remote is
/// synced (``VaultSyncService/sync(name:)``: due queued pushes, a pull and merge, then a push of
/// local commits). A pull that changed the head is reported through `onChanged` (the daemon
/// sends `vault.changed` to the owning site's connections). After each round the lanes are
/// checked (``lanes``). Nothing runs while locked, or while `isMetered` says the link is metered.
public final class VaultSyncScheduler: Sendable {
    public let service: VaultSyncService
    public let interval: Duration
    private let isUnlocked: @Sendable () -> Bool
    private let isMetered: @Sendable () -> Bool
    private let onChanged: @Sendable (_ vault: String, _ siteID: String?, _ outcome: PullOutcome) -> Void
    private let note: @Sendable (String) -> Void
    /// The lane checks run after each round (and so on unlock); nil: none.
    public let lanes: LaneWatch?
    private let thread = BackgroundLoop(name: "sitekeep-sync")
    private struct State {
        var rounds = 0
        var last: [String: (Int64, String?)] = [:]
        /// Vaults not synced because the server refuses their id, by name, with the id said:
        /// said once, and tried again only when the vault's id changes.
        var refusedIDs: [String: String] = [:]
    }
    private let state = Mutex(State())
    /// How often the lock state is looked at between rounds (an unlock syncs within this).
    static let poll: Duration = .seconds(1)

    public init(service: VaultSyncService, interval: Duration, isUnlocked: @escaping @Sendable () -> Bool,
                isMetered: @escaping @Sendable () -> Bool = { false },
                onChanged: @escaping @Sendable (_ vault: String, _ siteID: String?, _ outcome: PullOutcome) -> Void,
                note: @escaping @Sendable (String) -> Void = { _ in }, lanes: LaneWatch? = nil) {
        self.service = service
        self.lanes = lanes
        self.interval = interval
        self.isUnlocked = isUnlocked
        self.isMetered = isMetered
        self.onChanged = onChanged
        self.note = note
    }

    /// Rounds run so far (each over every vault with a remote).
    public var rounds: Int { state.withLock { $0.rounds } }

    /// Starts the thread (once).
    public func start() {
        thread.start { [self] loop in run(loop) }
    }

    /// Runs a round now (when unlocked and not metered).
    public func syncNow() { thread.wake() }

    /// Stops the thread, waiting for a round in progress to end.
    public func stop() { thread.stop() }

    /// The vault's sync state: the last round's time and error, what waits, what conflicts.
    public func status(vault name: String) -> VaultSyncState {
        let last = state.withLock { $0.last[name] }
        var out = VaultSyncState(lastSyncMs: last?.0, lastError: last?.1, queued: 0, conflicts: [])
        if let v = try? service.library.vault(named: name) {
            out.queued = (try? PushQueue(vaultRoot: v.root).entries().count) ?? 0
            out.conflicts = (try? v.mergeState()?.conflicts) ?? []
        }
        return out
    }

    private var isStopped: Bool { thread.isStopped }

    private func run(_ loop: BackgroundLoop) {
        var wasUnlocked = false
        var woken = false
        var due = Clocks.monotonicNow()
        while !loop.isStopped {
            let unlocked = isUnlocked()
            let forced = woken || loop.takeWake()
            if unlocked && (!wasUnlocked || forced || Clocks.monotonicNow() >= due) {
                if isMetered() {
                    note("vault sync skipped: the network link is metered")
                } else {
                    round()
                }
                due = Clocks.monotonicNow().advanced(by: interval)
            }
            wasUnlocked = unlocked
            if loop.isStopped { break }
            woken = loop.nap(min(Self.poll, max(.milliseconds(10), due - Clocks.monotonicNow())))
        }
    }

    /// One round over every vault that has a remote, each on its own (one failing does not stop the rest).
    func round() {
        let names = Set(((try? service.remotes.all()) ?? []).map(\.vault))
        let records = ((try? service.library.records()) ?? []).filter { names.contains($0.name) }
        for r in records {
            if isStopped || !isUnlocked() { break }
            if let skipped = refusedByServerRule(r) {
                if let skipped { note(skipped) }
                continue
            }
            do {
                _ = try reporting(r.name, siteID: r.siteID) { () throws(VaultError) in try service.sync(name: r.name) }
            } catch let e {
                note("vault \(r.name) did not sync: \(e.description)")
            }
        }
        if !isStopped { lanes?.check() }
        state.withLock { $0.rounds += 1 }
    }

    /// For a vault whose remote is a vault server that would refuse its id (``ServerVaultID``):
    /// `.some(message)` the first time (the message to note, also kept as the vault's sync
    /// error), `.some(nil)` on later rounds while the id is the same; nil when it may sync.
    /// Without this the server's HTTP 400 came back every round.
    func refusedByServerRule(_ r: VaultRecord) -> String?? {
        guard !ServerVaultID.isValid(r.vaultID), (try? service.remote(r.name, nil))?.kind == .api else {
            state.withLock { _ = $0.refusedIDs.removeValue(forKey: r.name) }
            return nil
        }
        let message = "vault \(r.name) is not synced: \(VaultError.serverRefusesVaultID(r.vaultID).description); "
            + "SiteKeep stops trying until the vault's id changes"
        let first = state.withLock { s -> Bool in
            guard s.refusedIDs[r.name] != r.vaultID else { return false }
            s.refusedIDs[r.name] = r.vaultID
            return true
        }
        if first { record(r.name, error: message) }
        return .some(first ? message : nil)
    }

    /// A pull asked for by a command the daemon runs (`sitekeep vault pull` while it serves),
    /// done as a round does it: its time and error show in ``status(vault:)`` and a change it
    /// brings reaches the owning site's connections through `onChanged`, as the background
    /// sync's would. Runs on the caller's thread (the vault's lock keeps it from racing a round).
    public func pull(name: String, remote: String? = nil) throws(VaultError) -> PullOutcome {
        let siteID = try service.library.open(name).record.siteID
        return try reporting(name, siteID: siteID) { () throws(VaultError) in try service.pull(name: name, remote: remote) }
    }

    /// A push asked for by a command the daemon runs; its time and error show in ``status(vault:)``.
    public func push(name: String, remote: String? = nil) throws(VaultError) -> PushOutcome {
        var error: String?
        defer { record(name, error: error) }
        do { return try service.push(name: name, remote: remote) } catch let e {
            error = e.description
            throw e
        }
    }

    /// Runs `pull` for vault `name`, records its time and error, and reports a changed head or
    /// a conflict through `onChanged`.
    private func reporting(_ name: String, siteID: String?, _ pull: () throws(VaultError) -> PullOutcome) throws(VaultError) -> PullOutcome {
        var error: String?
        defer { record(name, error: error) }
        do {
            let before = try service.library.vault(named: name).status().headCommit
            let outcome = try pull()
            let after = try service.library.vault(named: name).status().headCommit
            if after != before || !(outcome.merge?.conflicts.isEmpty ?? true) { onChanged(name, siteID, outcome) }
            return outcome
        } catch let e {
            error = e.description
            throw e
        }
    }

    private func record(_ name: String, error: String?) {
        let now = Clocks.wallMilliseconds()
        state.withLock { $0.last[name] = (now, error) }
    }
}

/// Whether the system's network link is metered, as NetworkManager says (its `Metered`
/// property on the system bus: 1 yes or 3 guessed yes), read with `busctl`; false where
/// NetworkManager or busctl is absent.
public enum NetworkMetering {
    public static func networkManagerSaysMetered() -> Bool {
        let candidates: [String] = ["/usr/bin/busctl", "/bin/busctl"]
        guard let busctl = candidates.first(where: { path in access(path, X_OK) == 0 }) else { return false }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return false }
        let child = try? ChildProcess.spawn(busctl, arguments: ["--system", "--timeout=2", "get-property", "org.freedesktop.NetworkManager",
                                                                "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager", "Metered"],
                                            stdout: .descriptor(fds[1]))
        close(fds[1])
        defer { close(fds[0]) }
        guard let child else { return false }
        var out: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 256)
        while out.count < 4096 {
            let n = read(fds[0], &buffer, buffer.count)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            out += buffer[0..<n]
        }
        guard child.wait(timeout: Duration.seconds(5)) == ChildProcess.Termination.exited(0) else { child.stop(); return false }
        // "u 1"
        let words = String(decoding: out, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        return words.count == 2 && (words[1] == "1" || words[1] == "3")
    }
}
