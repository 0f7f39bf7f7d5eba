/// A command was invoked wrongly: exit status 64 (`EX_USAGE`), message on stderr.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    /// The command whose help to point at (`sitekeep vault cat`), if known.
    public var command: String?
    public init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }
    public var description: String { message }
}

/// A command failed: exit status 1. The message names the problem, the remedy names the fix.
public struct CommandFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public let problem: String
    public let remedy: String?
    /// A stable machine-readable code for `--json` output.
    public let code: String
    public init(_ problem: String, remedy: String? = nil, code: String = "failed") {
        self.problem = problem
        self.remedy = remedy
        self.code = code
    }
    public var description: String { remedy.map { "\(problem); \($0)" } ?? problem }
}

/// Exit statuses.
public enum ExitStatus: Int32, Sendable {
    case success = 0
    case failure = 1
    case usage = 64
}

/// A layer's error that knows its stable `--json` code (the command files make the layers'
/// error types conform); reported like a ``CommandFailure``.
protocol CodedError: Error, CustomStringConvertible {
    var code: String { get }
    var remedy: String? { get }
}
