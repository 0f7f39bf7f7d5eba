#if canImport(Glibc)
import Glibc
#endif
import CLinux
import SiteKeepCrypto
import SiteKeepKeyring

/// Exponential back-off of failed unlocks, kept in the keyring (item kind `unlock-backoff`,
/// id `state`) so that neither restarting SiteKeep nor deleting a file in the store home
/// resets it.
///
/// Failures 1–3 cost nothing; from the 4th on the wait doubles from 1 s up to 5 minutes.
/// The wait is kept as a wall-clock time; if the clock goes backwards the remaining wait is
/// capped at the current delay, so a clock change cannot lengthen it for ever nor skip it.
///
/// **Atomic across processes.** ``attempt(now:_:)`` holds an exclusive `flock` on
/// `unlock.lock` in the home across the check, the attempt (the KDF) and the update, so two
/// processes (the daemon and a one-shot command, or two commands) cannot both take the same
/// free attempt or lose each other's failure.
///
/// **Missing or damaged records.** Once the store's ``KeyringStateMarker`` says the record
/// exists, a record that is missing or cannot be parsed counts as the maximum: 64 failures and a
/// full 5-minute wait from the moment it was found so (written back at once). A store made
/// before the record existed is migrated: its plain `unlock-backoff` file (`v1 F T`) is carried
/// over; without one, the store counts as the maximum too, but with no wait running (the next
/// attempt is allowed, a failure waits 5 minutes, a success resets the count).
///
/// - Note: a process of the same user that can delete keyring items (any, on an unlocked Secret
///   Service; anything that rewrites `keyring.v1`, on the file keyring) and the marker file can
///   still reset the count; see threat T11.
struct UnlockBackoff: Sendable {
    /// The record's keyring item kind.
    static let itemKind = "unlock-backoff"
    /// The old plain file in the home (format `v1 FAILURES LAST`), migrated into the keyring.
    static let legacyFileName = "unlock-backoff"
    /// The lock file held across check, attempt and update.
    static let lockFileName = "unlock.lock"
    static let freeAttempts = 3
    static let maximumDelay: Int64 = 300
    /// The failure count a missing or damaged record stands for (any count ≥ 12 waits the maximum).
    static let maximumCount = 64

    let keyring: any KeyringBackend
    let item: KeyringItemID
    let home: String
    let marker: KeyringStateMarker
    /// Whether the store has unlock slots (asked only for a store not yet migrated).
    let isInitialized: @Sendable () throws(CustodyError) -> Bool

    init(keyring: any KeyringBackend, storeID: String, home: String, marker: KeyringStateMarker,
         isInitialized: @escaping @Sendable () throws(CustodyError) -> Bool) {
        self.keyring = keyring
        self.item = KeyringItemID(store: storeID, kind: Self.itemKind, id: "state")
        self.home = home
        self.marker = marker
        self.isInitialized = isInitialized
    }

    struct State: Equatable, Sendable {
        var failures: Int
        var lastFailure: Int64   // wall-clock seconds

        static let zero = State(failures: 0, lastFailure: 0)

        var encoded: [UInt8] { Array("sitekeep-backoff 2 \(failures) \(lastFailure)\n".utf8) }

        /// The keyring record (`sitekeep-backoff 2 F T`), or the legacy file (`v1 F T`); nil when damaged.
        static func parse(_ bytes: [UInt8], legacy: Bool = false) -> State? {
            let parts = String(decoding: bytes, as: UTF8.self).trimmingSpaces().split(separator: " ").map(String.init)
            let header = legacy ? ["v1"] : ["sitekeep-backoff", "2"]
            guard parts.count == header.count + 2, Array(parts.prefix(header.count)) == header,
                  let f = Int(parts[header.count]), (0...1_000_000).contains(f),
                  let t = Int64(parts[header.count + 1]) else { return nil }
            return State(failures: f, lastFailure: t)
        }
    }

    static func delay(afterFailures n: Int) -> Int64 {
        guard n > freeAttempts else { return 0 }
        let exponent = min(n - freeAttempts - 1, 20)
        return min(Int64(1) << Int64(exponent), maximumDelay)
    }

    /// Seconds still to wait at wall time `now` in `state` (0 when an attempt is allowed).
    static func remaining(_ state: State, now: Int64) -> Int {
        let delay = delay(afterFailures: state.failures)
        guard delay > 0 else { return 0 }
        let elapsed = now - state.lastFailure
        if elapsed < 0 { return Int(delay) }   // clock went backwards
        return Int(max(0, delay - elapsed))
    }

    /// Runs `body` (one unlock attempt) under the back-off and its lock: refused with
    /// ``CustodyError/backingOff(secondsRemaining:)`` while a wait runs; an
    /// ``CustodyError/unlockFailed`` from it counts a failure; success resets the count.
    func attempt<R: ~Copyable>(now: () -> Int64, _ body: () throws(CustodyError) -> R) throws(CustodyError) -> R {
        try Files.withExclusiveLock(home + "/" + Self.lockFileName) { () throws(CustodyError) -> R in
            let state = try load(now: now(), repair: true)
            let wait = Self.remaining(state, now: now())
            guard wait == 0 else { throw .backingOff(secondsRemaining: wait) }
            do throws(CustodyError) {
                let result = try body()
                if state.failures != 0 { try save(.zero) }
                return result
            } catch .unlockFailed {
                try save(State(failures: min(state.failures + 1, 1000), lastFailure: now()))
                throw .unlockFailed
            }
        }
    }

    /// Seconds before the next attempt is allowed (read only: takes no lock, writes nothing).
    func remaining(now: Int64) throws(CustodyError) -> Int {
        Self.remaining(try load(now: now, repair: false), now: now)
    }

    /// The current state. With `repair`, a missing or damaged record of a migrated store is
    /// written back as the maximum, so its wait runs from now (call it under the lock only).
    func load(now: Int64, repair: Bool) throws(CustodyError) -> State {
        let blob: [UInt8]?
        do { blob = try keyring.load(item) } catch .itemMissing { blob = nil } catch { throw .keyring(error) }
        if let blob, let state = State.parse(blob) { return state }
        if blob != nil || marker.isPresent {
            // Removed or damaged: the maximum, waiting from now.
            let state = State(failures: Self.maximumCount, lastFailure: now)
            if repair { try save(state) }
            return state
        }
        return try legacyState()
    }

    /// The state of a store made before the record existed: its plain file, else the maximum
    /// with no wait running (zero for a store with no slots yet).
    func legacyState() throws(CustodyError) -> State {
        if let bytes = try Files.readIfExists(home + "/" + Self.legacyFileName, limit: 256) {
            return State.parse(bytes, legacy: true) ?? State(failures: Self.maximumCount, lastFailure: 0)
        }
        return try isInitialized() ? State(failures: Self.maximumCount, lastFailure: 0) : .zero
    }

    /// Moves a store made before the record existed into the keyring (the record from
    /// ``legacyState()``; the plain file is removed). Leaves an existing record alone.
    func migrate() throws(CustodyError) {
        try Files.withExclusiveLock(home + "/" + Self.lockFileName) { () throws(CustodyError) in
            do throws(KeyringError) { _ = try keyring.load(item); return } catch .itemMissing {} catch { throw .keyring(error) }
            try save(try legacyState())
            unlink(home + "/" + Self.legacyFileName)
        }
    }

    func save(_ s: State) throws(CustodyError) {
        do { try keyring.store(s.encoded, for: item, label: "SiteKeep unlock back-off") } catch { throw .keyring(error) }
    }
}

/// The home's marker (file `keyring-state`) that this store keeps its unlock back-off record and
/// its audit log's anchor in the keyring. Written once both exist (by `init`, or when a store
/// made before them is first opened); from then on a missing record or anchor means it was
/// removed, and counts against whoever removed it.
struct KeyringStateMarker: Sendable {
    static let fileName = "keyring-state"
    let path: String

    var isPresent: Bool { Files.exists(path) }

    func write() throws(CustodyError) {
        try Files.writeAtomically(Array("sitekeep keyring-state 1: the unlock back-off and the audit log anchor are keyring items\n".utf8), to: path)
    }
}
