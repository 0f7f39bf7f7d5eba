import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCustody
#if canImport(Glibc)
import Glibc
#endif

/// An approval the agent keeps serves only the use it names (issue 45, defect 7): none is kept
/// for a login whose destination the connection did not verify (every such login looks the
/// same), and one kept for a use serves only the process that asked, so another process of the
/// user cannot ride it. Over the real socket, with outside processes as clients.
@Suite struct KeptApprovalTests {
    static let python = "/usr/bin/python3"

    static func server(_ f: AgentFixture) throws -> AgentSocketServer {
        let s = try AgentSocketServer(path: f.dir + "/run/agent.sock", keys: try f.keys())
        s.start()
        return s
    }

    /// A raw agent client, as malware would write one: lists the keys and asks for a signature
    /// of an SSH login request as `alice`, over a connection that bound no session.
    static func loginClient(_ f: AgentFixture) throws -> String {
        let path = f.dir + "/login.py"
        try Data("""
        import os, socket, struct, sys
        def s(b): return struct.pack('>I', len(b)) + b
        a = socket.socket(socket.AF_UNIX); a.connect(os.environ['SSH_AUTH_SOCK'])
        def ask(p):
            a.sendall(s(p)); n = struct.unpack('>I', a.recv(4, socket.MSG_WAITALL))[0]
            return a.recv(n, socket.MSG_WAITALL)
        ids = ask(bytes([11])); blob = ids[9:9 + struct.unpack('>I', ids[5:9])[0]]
        data = s(os.urandom(32)) + bytes([50]) + s(b'alice') + s(b'ssh-connection') + s(b'publickey') + bytes([1]) + s(b'ssh-ed25519') + s(blob)
        print('signed' if ask(bytes([13]) + s(blob) + s(data) + struct.pack('>I', 0))[0] == 14 else 'refused')

        """.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: python)))
    func anUnboundLoginKeepsNoApprovalForAnotherLogin() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let server = try Self.server(f)
        defer { server.shutdown() }
        let client = try Self.loginClient(f)
        for i in 1...2 {
            let r = run(Self.python, [client], env: ["SSH_AUTH_SOCK": server.path])
            #expect(r.out == "signed\n", "\(r.out) \(r.err)")
            #expect(f.prompts.count == i, "login \(i) was signed on another login's approval: \(f.prompts)")
        }
        // In one process and one connection too: each unbound login is asked for.
        let key = try f.sshKey("k")
        let c = try AgentClient(path: server.path, timeout: .seconds(10))
        for i in 1...2 {
            _ = try c.sign(blob: key.blob, data: userAuthData(sessionID: [UInt8](repeating: UInt8(i), count: 32), key: key))
        }
        #expect(f.prompts.count == 4, "\(f.prompts)")
        #expect(f.prompts.last?.contains("this signature only") == true, "the prompt says what it approves: \(f.prompts.last ?? "")")
    }

    @Test(.enabled(if: OpenSSH.available))
    func anApprovalServesOnlyTheProcessThatAskedForIt() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let server = try Self.server(f)
        defer { server.shutdown() }
        let key = try f.sshKey("k")
        let pub = f.dir + "/k.pub"
        try Data((key.authorizedKeysLine(comment: "k") + "\n").utf8).write(to: URL(fileURLWithPath: pub))
        let message = f.dir + "/message.txt"
        try Data("signed by two processes\n".utf8).write(to: URL(fileURLWithPath: message))
        for i in 1...2 {
            try? FileManager.default.removeItem(atPath: message + ".sig")
            let r = run(OpenSSH.keygen, ["-Y", "sign", "-f", pub, "-n", "file", message], env: ["SSH_AUTH_SOCK": server.path])
            #expect(r.status == 0, "\(r.err)")
            #expect(f.prompts.count == i, "ssh-keygen \(i) signed on another process's approval: \(f.prompts)")
        }
        // The process that was asked keeps its approval for the same use, on a new connection too.
        let before = f.prompts.count
        for _ in 1...2 {
            let c = try AgentClient(path: server.path, timeout: .seconds(10))
            #expect(key.isValidSignature(try c.sign(blob: key.blob, data: sshsigData("file")), for: sshsigData("file")))
        }
        #expect(f.prompts.count == before + 1, "\(f.prompts)")
        #expect(f.prompts.last?.contains("this process only") == true, "the prompt says what it approves: \(f.prompts.last ?? "")")
    }
}
