public import SiteKeepSocket
import SiteKeepSystem

/// Where a daemon listens.
///
/// - The bridge socket: `$SITEKEEP_SOCK`, else `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`.
/// - The control socket: `control.sock` beside it. A daemon serves one store; every control
///   request names the store id it means and a daemon serving another store refuses it
///   (`wrong_store`), so `--home B` never hands B's secret to the daemon of store A.
public enum DaemonSockets {
    /// The bridge socket path for `environment`.
    /// - Throws: ``BridgeError/socketPath(_:)`` when neither variable is set.
    public static func bridge(environment: [String: String]) throws(BridgeError) -> String {
        if let p = environment["SITEKEEP_SOCK"], !p.isEmpty { return p }
        if let run = UnixSocket.runtimeFolder(environment: environment) { return run + "/bridge.sock" }
        throw .socketPath("neither SITEKEEP_SOCK nor XDG_RUNTIME_DIR is set")
    }

    /// The control socket path for `environment`.
    public static func control(environment: [String: String]) throws(BridgeError) -> String {
        besideBridge(try bridge(environment: environment))
    }

    /// `control.sock` in the bridge socket's folder.
    public static func besideBridge(_ bridge: String) -> String {
        guard let slash = bridge.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "control.sock" }
        return String(bridge[..<slash]) + "/control.sock"
    }
}

extension BridgeError {
    /// The bridge's name for a socket failure.
    public init(_ e: SocketError) {
        switch e {
        case let .call(what, errno): self = .socket(call: what, errno: errno.rawValue)
        case .path(let why): self = .socketPath(why)
        case let .untrusted(path, reason): self = .untrustedSocket(path: path, reason: reason)
        case .activation(let why): self = .socketActivation(why)
        }
    }
}
