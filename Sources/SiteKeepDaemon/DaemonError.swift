/// Why a store could not be opened or a daemon could not start: the problem, the fix, and a
/// stable machine-readable code (the command line's `--json` code). Never carries a secret.
public struct DaemonError: Error, Sendable, Equatable, CustomStringConvertible {
    public let problem: String
    public let remedy: String?
    /// `no_store`, `keyring_mismatch`, `keyring`, `bad_askpass`, `no_socket`, …
    public let code: String

    public init(_ problem: String, remedy: String? = nil, code: String) {
        self.problem = problem
        self.remedy = remedy
        self.code = code
    }

    /// The problem alone (the remedy is ``remedy``).
    public var description: String { problem }
}
