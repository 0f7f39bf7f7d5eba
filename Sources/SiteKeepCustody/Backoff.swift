import SiteKeepCrypto

/// Exponential back-off of failed unlocks, persisted in the store home (`unlock-backoff`, 0600,
/// written atomically) so that restarting SiteKeep does not reset it.
///
/// Failures 1–3 cost nothing; from the 4th on the wait doubles from 1 s up to 5 minutes.
/// The wait is kept as a wall-clock time; if the clock goes backwards the remaining wait is
/// capped at the current delay, so a clock change cannot lengthen it for ever nor skip it.
struct UnlockBackoff {
    static let fileName = "unlock-backoff"
    static let freeAttempts = 3
    static let maximumDelay: Int64 = 300

    let path: String

    struct State: Equatable {
        var failures: Int
        var lastFailure: Int64   // wall-clock seconds
    }

    static func delay(afterFailures n: Int) -> Int64 {
        guard n > freeAttempts else { return 0 }
        let exponent = min(n - freeAttempts - 1, 20)
        return min(Int64(1) << Int64(exponent), maximumDelay)
    }

    func load() throws(CustodyError) -> State {
        guard let bytes = try Files.readIfExists(path, limit: 256) else { return State(failures: 0, lastFailure: 0) }
        let parts = String(decoding: bytes, as: UTF8.self).trimmingSpaces().split(separator: " ")
        guard parts.count == 3, parts[0] == "v1", let f = Int(parts[1]), f >= 0, let t = Int64(parts[2]) else {
            // A damaged file must not disable the back-off: treat it as the maximum.
            return State(failures: 64, lastFailure: 0)
        }
        return State(failures: f, lastFailure: t)
    }

    /// Seconds still to wait at wall time `now` (0 when an attempt is allowed).
    func remaining(now: Int64) throws(CustodyError) -> Int {
        let state = try load()
        let delay = Self.delay(afterFailures: state.failures)
        guard delay > 0 else { return 0 }
        let elapsed = now - state.lastFailure
        if elapsed < 0 { return Int(delay) }   // clock went backwards
        return Int(max(0, delay - elapsed))
    }

    func recordFailure(now: Int64) throws(CustodyError) {
        let state = try load()
        try save(State(failures: min(state.failures + 1, 1000), lastFailure: now))
    }

    func reset() throws(CustodyError) {
        let state = try load()
        if state.failures != 0 { try save(State(failures: 0, lastFailure: 0)) }
    }

    private func save(_ s: State) throws(CustodyError) {
        try Files.writeAtomically(Array("v1 \(s.failures) \(s.lastFailure)\n".utf8), to: path)
    }
}
