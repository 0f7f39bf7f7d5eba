import Synchronization
import SiteKeepCustody

/// The daemon's lane checks (issue 48): on unlock and after each sync round (the scheduler's
/// ``VaultSyncScheduler/lanes``), and when `inbox list` runs in the daemon. One check at a time;
/// nothing is checked until a notifier is attached, so no message is recorded as seen before
/// it could be shown. The notifier is told of each check that found news, once.
public final class LaneWatch: Sendable {
    public let service: VaultSyncService
    public let home: String
    private let notifier = Mutex<(@Sendable (LaneCheck) -> Bool)?>(nil)
    private let turn = Mutex(0)
    private let note: @Sendable (String) -> Void

    /// - Parameter note: where a lane that cannot be read, or a seen record set aside, is said (the daemon's log).
    public init(service: VaultSyncService, home: String, note: @escaping @Sendable (String) -> Void = { _ in }) {
        self.service = service
        self.home = home
        self.note = note
    }

    /// Sets what shows news (true: shown). Checks run from then on.
    public func attach(notify: @escaping @Sendable (LaneCheck) -> Bool) { notifier.withLock { $0 = notify } }

    /// Checks now, on the caller's thread (a check already running is waited for, then this one
    /// runs). - Returns: what it found; nil when no notifier is attached or SiteKeep is locked.
    @discardableResult
    public func check() -> LaneCheck? {
        guard let notify = notifier.withLock({ $0 }), service.custodian.isUnlocked else { return nil }
        return turn.withLock { count in
            count += 1
            let c = service.checkLanes(home: home, deliver: notify)
            if let reset = c.seenReset { note("lane messages: \(reset); set aside as lanes-seen.json.rejected, every unread message is notified again") }
            for f in c.failures { note("lane check: \(f)") }
            return c
        }
    }

    /// Checks run so far.
    public var checks: Int { turn.withLock { $0 } }
}
