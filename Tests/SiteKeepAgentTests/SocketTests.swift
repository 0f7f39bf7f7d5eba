import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepSocket
import SiteKeepCustody
#if canImport(Glibc)
import Glibc
#endif

/// The agent socket with real connections: malformed input gets failure or a closed connection
/// and the socket goes on serving; other users are refused; the path is private.
@Suite struct SocketTests {
    static func server(_ f: AgentFixture) throws -> AgentSocketServer {
        let s = try AgentSocketServer(path: f.dir + "/run/agent.sock", keys: try f.keys())
        s.start()
        return s
    }

    /// Bytes read until the peer closes (or `limit` seconds pass), without a reply expected.
    static func readsEnd(_ client: AgentClient) -> Bool {
        (try? client.readReply()) == nil
    }

    @Test func malformedMessagesDoNotStopTheSocket() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let server = try Self.server(f)
        defer { server.shutdown() }
        let key = try f.sshKey("k")

        // One connection: failures, and it keeps answering.
        let c = try AgentClient(path: server.path, timeout: .seconds(10))
        #expect(try c.roundTrip([99]) == [AgentMessageType.failure])                             // unknown type
        #expect(try c.roundTrip([13, 0, 0, 0, 200, 1]) == [AgentMessageType.failure])             // truncated inner length
        #expect(try c.roundTrip(signRequest(blob: SSHPublicKey.ed25519([UInt8](repeating: 1, count: 32)).blob, data: [1])) == [AgentMessageType.failure])
        #expect(try c.roundTrip([]) == [AgentMessageType.failure])                                // empty message
        #expect(try c.identities().map(\.blob) == [key.blob])
        let sig = try c.sign(blob: key.blob, data: sshsigData("file"))
        #expect(key.isValidSignature(sig, for: sshsigData("file")))

        // A length over 256 KiB closes that connection only.
        let big = try AgentClient(path: server.path, timeout: .seconds(10))
        try big.send(raw: [0x00, 0x04, 0x00, 0x01, 11])
        #expect(Self.readsEnd(big))
        // A message cut short by the client's end closes quietly.
        let cut = try AgentClient(path: server.path, timeout: .seconds(10))
        try cut.send(raw: [0, 0, 0, 9, 13])
        cut.finishSending()
        #expect(Self.readsEnd(cut))
        // The socket still serves new connections and the old one.
        #expect(try AgentClient(path: server.path, timeout: .seconds(10)).identities().count == 1)
        #expect(try c.identities().count == 1)
    }

    /// Several connections at once each get their own answers.
    @Test func connectionsAreIndependent() async throws {
        let f = try AgentFixture(keys: [("k", .p256, SSHAgentPolicy())])
        let server = try Self.server(f)
        defer { server.shutdown() }
        let key = try f.sshKey("k")
        let path = server.path
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<4 {
                group.addTask {
                    let c = try AgentClient(path: path, timeout: .seconds(10))
                    let data = sshsigData("ns\(i % 2)")
                    for _ in 0..<20 { guard key.isValidSignature(try c.sign(blob: key.blob, data: data), for: data) else { return false } }
                    return true
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    /// A process of another user is disconnected before anything is read (SO_PEERCRED). Needs
    /// root to run a client as another user; the socket is opened up for it, so only the peer
    /// check stands in the way.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func otherUsersAreRefused() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let server = try Self.server(f)
        defer { server.shutdown() }
        for p in [f.dir, f.dir + "/run"] { chmod(p, 0o755) }
        chmod(server.path, 0o777)
        let asNobody = run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/ssh-add", "-L"],
                           env: ["SSH_AUTH_SOCK": server.path])
        #expect(asNobody.status != 0)
        #expect(!asNobody.out.contains("ssh-ed25519"), "another user was served: \(asNobody.out)")
        let asUs = run("/usr/bin/ssh-add", ["-L"], env: ["SSH_AUTH_SOCK": server.path])
        #expect(asUs.status == 0 && asUs.out.contains("sitekeep:k"), "\(asUs.err)")
    }

    @Test func thePathMustBePrivateAndShutdownRemovesTheSocket() throws {
        let f = try AgentFixture(keys: [])
        let open = f.dir + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        chmod(open, 0o755)
        #expect(throws: AgentSocketError.self) { try AgentSocketServer(path: open + "/agent.sock", keys: try f.keys()) }
        let plain = f.dir + "/plain"
        _ = FileManager.default.createFile(atPath: plain, contents: Data("x".utf8))
        #expect(throws: AgentSocketError.self) { try AgentSocketServer(path: plain, keys: try f.keys()) }
        let server = try Self.server(f)
        var st = stat()
        #expect(lstat(server.path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(throws: AgentSocketError.self) { try AgentSocketServer(path: server.path, keys: try f.keys()) }   // one listens already
        server.shutdown()
        #expect(!FileManager.default.fileExists(atPath: server.path))
        // A stale socket (left by a daemon that died: nobody listens) is replaced.
        close(try UnixSocket.listen(path: server.path))
        #expect(FileManager.default.fileExists(atPath: server.path))
        let again = try Self.server(f)
        #expect(try AgentClient(path: again.path).identities().isEmpty)
        again.shutdown()
    }
}
