/// The stable error codes a bridge reply can carry (`{id, ok: false, error: {code, message}}`).
///
/// Callers branch on the code; the message is for people. Codes are never renamed or reused:
/// ``allCases`` is the list `docs/OPS.md` documents.
public enum BridgeErrorCode: String, Sendable, Equatable, CaseIterable {
    /// The frame is not a JSON object of the request shape (malformed JSON, wrong types, bad values).
    case badRequest = "bad_request"
    /// The op is not in the catalogue.
    case unknownOp = "unknown_op"
    /// The request or its `args` carry a member the catalogue does not list.
    case unknownField = "unknown_field"
    /// The request's `v` is not a protocol version this daemon speaks.
    case unsupportedVersion = "unsupported_version"
    /// The connection is not bound to a site yet: its first message must be `hello`.
    case helloRequired = "hello_required"
    /// The origin is unknown, not app-bound, malformed, or not the site this connection is bound to;
    /// or that site was removed or changed since `hello` (the connection is then closed).
    case forbiddenOrigin = "forbidden_origin"
    /// The peer process runs as another user.
    case forbiddenPeer = "forbidden_peer"
    /// The connecting process is not a host of the site its `hello` names.
    case forbiddenHost = "forbidden_host"
    /// The connection's site is not on the op's allow-list (or the op is an event).
    case notAllowed = "not_allowed"
    /// The op needs a fresh presence proof and none could be had.
    case presenceRequired = "presence_required"
    /// The user refused the presence check.
    case presenceDenied = "presence_denied"
    /// The connection spent its token bucket for this op.
    case rateLimited = "rate_limited"
    /// The frame or a value is larger than its limit.
    case tooLarge = "too_large"
    /// The named thing (key, file, vault) does not exist.
    case notFound = "not_found"
    /// The site's storage quota would be exceeded.
    case quotaExceeded = "quota_exceeded"
    /// SiteKeep is locked; unlock it first.
    case locked = "locked"
    /// The service behind the op is not set up in this daemon.
    case notConfigured = "not_configured"
    /// The op exists but this platform does not offer it.
    case unsupported = "unsupported"
    /// The vault's HEAD is not served: unsigned, or signed by a signer SiteKeep does not trust.
    case vaultUnverified = "vault_unverified"
    /// Something failed inside SiteKeep; the message says no more than that.
    case `internal` = "internal"

    /// What the code means, for the op document.
    public var meaning: String {
        switch self {
        case .badRequest: "the frame is not valid JSON of the request shape, or a value has the wrong type or form"
        case .unknownOp: "the op is not in the catalogue"
        case .unknownField: "the request or its args carry a member the catalogue does not list"
        case .unsupportedVersion: "`v` is not a protocol version this daemon speaks"
        case .helloRequired: "the connection is not bound to a site yet; send `hello` first"
        case .forbiddenOrigin: "the origin is unknown, not app-bound, malformed, or not the connection's site; or the connection's site was removed or changed since `hello` (the connection is then closed)"
        case .forbiddenPeer: "the peer process runs as another user (SO_PEERCRED); the connection is closed"
        case .forbiddenHost: "the connecting process is not a host of the site (the SiteKeep browser, or an executable added with `sitekeep site host add`), runs with variables that load other code (LD_PRELOAD, ...), or could not be identified; `hello` is refused"
        case .notAllowed: "the connection's site is not on the op's allow-list, or the op is an event"
        case .presenceRequired: "the op needs a presence proof no older than 60 s and none could be had"
        case .presenceDenied: "the user refused the presence check"
        case .rateLimited: "this connection spent its token bucket for the op; wait and retry"
        case .tooLarge: "the frame or a value exceeds its limit"
        case .notFound: "the named key, file or vault does not exist"
        case .quotaExceeded: "the site's storage quota would be exceeded"
        case .locked: "SiteKeep is locked; run `sitekeep unlock`"
        case .notConfigured: "the service behind the op is not set up in this daemon"
        case .unsupported: "the op exists but this platform does not offer it, or the vault asks for a format or feature SiteKeep does not implement"
        case .vaultUnverified: "the vault's HEAD is not served: unsigned, or signed by a signer this store has not pinned (the message names the commit and the signer; `sitekeep vault status` shows them)"
        case .internal: "SiteKeep failed inside; the daemon log has details"
        }
    }
}

/// A refusal or failure the bridge answers with an error reply.
///
/// Messages are written for the caller and never contain secret material (no key bytes, no
/// plaintext of sealed content, no passphrases).
public struct BridgeFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: BridgeErrorCode
    public let message: String

    public init(_ code: BridgeErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Errors of the bridge's own machinery: the catalogue file, the socket, the client.
public enum BridgeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `ops.json` (or another catalogue) is invalid; `reason` names the member and the fix.
    case invalidCatalogue(String)
    /// The catalogue names an op with no handler and no `unsupported` status, or a handler has no op.
    case catalogueMismatch(String)
    /// A socket call failed; `call` names it and `errno` is the C error number.
    case socket(call: String, errno: Int32)
    /// The socket path is unusable (too long, not a socket, wrong owner or mode).
    case socketPath(String)
    /// `LISTEN_FDS` / `LISTEN_PID` are malformed or name no usable socket.
    case socketActivation(String)
    /// A client refused to talk to the socket at `path` (nothing was sent): its folder is open
    /// to others or not ours, the socket file is not ours, or the listener runs as another
    /// user. `reason` says which and what to do.
    case untrustedSocket(path: String, reason: String)
    /// The peer closed the connection.
    case connectionClosed
    /// The peer sent something that is not a bridge frame.
    case protocolViolation(String)
    /// The daemon answered with an error reply.
    case reply(BridgeFailure)
    /// A wait for a reply or event ran out.
    case timeout
    /// The daemon refused a control request (`code` and its message, which names the fix).
    case daemonRefused(code: String, message: String)

    public var description: String {
        switch self {
        case .invalidCatalogue(let r): "the op catalogue is invalid: \(r); fix ops.json and restart the daemon"
        case .catalogueMismatch(let r): "the op catalogue and the handlers disagree: \(r); add the op or its handler"
        case let .socket(call, e): "\(call) failed with errno \(e); check the socket path, its folder's owner and mode"
        case .socketPath(let r): r.contains("already listens")
            ? "the bridge socket path is unusable: \(r); stop that daemon with 'sitekeep stop' first (or change the running one with 'sitekeep config set')"
            : "the bridge socket path is unusable: \(r); set SITEKEEP_SOCK or XDG_RUNTIME_DIR"
        case .socketActivation(let r): "systemd socket activation failed: \(r); check sitekeep.socket"
        case let .untrustedSocket(path, r): "refusing to talk to the socket \(path), nothing was sent: \(r)"
        case .connectionClosed: "the SiteKeep daemon closed the connection; is `sitekeep serve` running?"
        case .protocolViolation(let r): "the peer broke the bridge protocol: \(r)"
        case .reply(let f): "the daemon refused the request: \(f)"
        case .timeout: "no answer from the SiteKeep daemon in time; check that it is running"
        case .daemonRefused(_, let message): message
        }
    }
}
