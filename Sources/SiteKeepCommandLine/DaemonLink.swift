import Foundation
internal import SiteKeepBridge
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON

/// The CLI's link to a running daemon (`sitekeep serve`) through its control socket, for
/// `unlock`, `lock` and `status`.
struct DaemonLink: Sendable {
    let controlPath: String

    /// The daemon's control socket for this environment, when a daemon answers there.
    static func find(_ inv: Invocation) throws -> DaemonLink? {
        guard let bridge = try? BridgeDaemon.socketPath(environment: inv.environment) else { return nil }
        let link = DaemonLink(controlPath: ControlServer.path(besideBridgeSocket: bridge))
        do {
            guard try ControlClient.send(path: link.controlPath, op: "status") != nil else { return nil }
        } catch {
            // A listener we cannot trust is named, never silently skipped: the user meant a daemon.
            guard case let .untrustedSocket(path, reason) = error else { return nil }
            throw CommandFailure("refusing to talk to \(path), nothing was sent: \(reason)", code: "untrusted_socket")
        }
        return link
    }

    private func request(_ op: String, method: String? = nil, secret: UnsafeRawBufferPointer? = nil) throws -> JSONValue {
        guard let reply = try ControlClient.send(path: controlPath, op: op, method: method, secret: secret) else {
            throw CommandFailure("the daemon stopped answering at \(controlPath)", remedy: "start it again with 'sitekeep serve'", code: "no_daemon")
        }
        if reply["ok"] != .bool(true) {
            throw CommandFailure(reply["error"]?.stringValue ?? "the daemon refused the request", code: "daemon")
        }
        return reply
    }

    /// Hands the daemon the invocation's unlock secret (read as for a one-shot unlock).
    func unlock(_ inv: Invocation) throws {
        let wrong = CustodyError.unlockFailed.description
        try UnlockInput.attempt(inv, isWrong: { ($0 as? CommandFailure)?.problem == wrong }) { input in
            let method: String
            let secret: SecretBytes
            switch input.take() {
            case .passphrase(let s): method = "passphrase"; secret = s
            case .prf(let s): method = "prf"; secret = s
            case .recoveryCode(let s): method = "recovery"; secret = s
            }
            _ = try secret.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> JSONValue in
                try request("unlock", method: method, secret: raw)
            }
        }
    }

    func lock() throws { _ = try request("lock") }

    func isUnlocked() throws -> Bool { try request("status")["unlocked"] == .bool(true) }
}
