import Testing
import Foundation
import Glibc
import SiteKeepTestSupport
@testable import SiteKeepBridge
import SiteKeepSocket

/// Every client checks the socket before it sends a byte (issue 12, defect 3): a fake daemon
/// that another user could have placed never receives the unlock secret, and the error names
/// the path and what was wrong.
@Suite(.serialized, .enabled(if: FakeDaemon.available)) struct ClientTrustTests {
    static let secret: [UInt8] = Array("correct horse battery".utf8)
    static var isRoot: Bool { getuid() == 0 }

    /// Sends the unlock secret to `path` as the CLI does; returns the error, if any.
    func unlock(_ path: String) -> BridgeError? {
        do {
            _ = try Self.secret.withUnsafeBytes { try ControlClient.send(path: path, store: "a-store", op: "unlock", method: "passphrase", secret: $0) }
            return nil
        } catch let e as BridgeError { return e } catch { return .protocolViolation("unexpected \(error)") }
    }

    func folder(mode: mode_t) throws -> String {
        let dir = try tempDir()
        chmod(dir, mode)
        return dir
    }

    func expectRefused(_ error: BridgeError?, path: String, saying words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case let .untrustedSocket(refused, reason) = error else {
            Issue.record("expected untrustedSocket for \(path), got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(refused == path, sourceLocation: sourceLocation)
        #expect(reason.contains(words), "\(reason)", sourceLocation: sourceLocation)
        #expect(error?.description.contains(path) == true && error?.description.contains("nothing was sent") == true, sourceLocation: sourceLocation)
    }

    /// The fake daemon counts what reaches it: a client that trusts it sends the header and the secret.
    @Test func theFakeDaemonSeesWhatATrustingClientSends() throws {
        let dir = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fake = try FakeDaemon(path: dir + "/control.sock")
        defer { fake.stop() }
        let fd = try UnixSocket.connectUnchecked(path: fake.path)
        _ = Self.secret.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        #expect(fake.connections(atLeast: 1) == [Self.secret.count])
    }

    @Test func aListenerInAFolderOpenToOthersGetsNothing() throws {
        let dir = try folder(mode: 0o777)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let control = try FakeDaemon(path: dir + "/control.sock")
        defer { control.stop() }
        let bridge = try FakeDaemon(path: dir + "/bridge.sock")
        defer { bridge.stop() }
        expectRefused(unlock(control.path), path: control.path, saying: "is open to other users (mode 777)")
        do {
            _ = try BridgeClient.connect(path: bridge.path)
            Issue.record("BridgeClient connected to a socket in a folder open to others")
        } catch { expectRefused(error, path: bridge.path, saying: "open to other users") }
        #expect(control.connections.isEmpty && bridge.connections.isEmpty, "a connection was made")
        // Group access alone is enough to refuse.
        chmod(dir, 0o750)
        expectRefused(unlock(control.path), path: control.path, saying: "mode 750")
        #expect(control.connections.isEmpty)
    }

    @Test(.enabled(if: isRoot)) func aListenerInAFolderOfAnotherUserGetsNothing() throws {
        let dir = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fake = try FakeDaemon(path: dir + "/control.sock")
        defer { fake.stop() }
        chown(dir, 65534, 65534)
        expectRefused(unlock(fake.path), path: fake.path, saying: "belongs to uid 65534")
        #expect(fake.connections.isEmpty)
    }

    @Test(.enabled(if: isRoot)) func aSocketFileOfAnotherUserGetsNothing() throws {
        let dir = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fake = try FakeDaemon(path: dir + "/control.sock")
        defer { fake.stop() }
        chown(fake.path, 65534, 65534)
        expectRefused(unlock(fake.path), path: fake.path, saying: "the socket file belongs to uid 65534")
        #expect(fake.connections.isEmpty)
    }

    /// The socket file and its folder are ours, but the listener runs as another user: only
    /// `SO_PEERCRED` after connect tells; the client hangs up without sending anything.
    @Test(.enabled(if: isRoot)) func aListenerOfAnotherUserGetsNothing() throws {
        let dir = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fake = try FakeDaemon(path: dir + "/control.sock", uid: 65534)
        defer { fake.stop() }
        var st = stat()
        #expect(lstat(fake.path, &st) == 0 && st.st_uid == getuid(), "the fake's socket file must be ours for this case")
        expectRefused(unlock(fake.path), path: fake.path, saying: "runs as uid 65534")
        #expect(fake.connections(atLeast: 1) == [0], "the listener of another user received bytes")
        do {
            _ = try BridgeClient.connect(path: fake.path)
            Issue.record("BridgeClient kept a connection to another user's listener")
        } catch { expectRefused(error, path: fake.path, saying: "runs as uid 65534") }
        #expect(fake.connections(atLeast: 2) == [0, 0])
    }

    /// No socket at the path is "no daemon", not an error.
    @Test func noSocketIsNoDaemon() throws {
        let dir = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(unlock(dir + "/control.sock") == nil)
    }
}
