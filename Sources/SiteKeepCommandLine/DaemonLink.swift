/// The CLI's link to a running daemon (`sitekeep serve`), for unlock, lock and status.
/// Filled in with the bridge's control connection.
struct DaemonLink: Sendable {
    static func find(_ inv: Invocation) throws -> DaemonLink? { nil }
    func unlock(_ inv: Invocation) throws {}
    func lock() throws {}
    func isUnlocked() throws -> Bool { false }
}
