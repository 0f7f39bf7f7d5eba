#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SiteKeepSocket
import SiteKeepSystem

/// The process at the other end of a socket, identified from `/proc` under a pidfd: real child
/// processes (Python, `/bin/sleep`) connect to a real listening socket, and what SiteKeep reads
/// of them is checked against what they are.
@Suite struct PeerProcessTests {
    /// A listening socket in a private folder, and a way to accept one connection.
    private final class Listener {
        let dir: String
        let path: String
        let fd: Int32

        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-peer-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            path = dir + "/s"
            fd = try UnixSocket.listen(path: path, what: "a test")
        }

        /// The next connection (10 s at most).
        func accept() throws -> Int32 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 10_000) == 1 else { throw Failure("no process connected within 10 s") }
            let c = Glibc.accept(fd, nil, nil)
            guard c >= 0 else { throw Failure("accept: \(Errno.current)") }
            return c
        }

        deinit {
            close(fd)
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    private static let python = "/usr/bin/python3"

    /// What ``PeerProcess`` read, under short names.
    struct Seen {
        let pid: Int32, uid: UInt32, path: String, replaced: Bool, executable: ExecutableIdentity, variables: [String], holding: PeerProcess.Holding
    }

    private static func seen(_ fd: Int32) throws -> Seen {
        let p = try PeerProcess.identify(socket: fd)
        return Seen(pid: p.pid, uid: p.uid, path: p.executablePath, replaced: p.executableReplaced, executable: p.executable,
                    variables: p.codeLoadingVariables, holding: p.holding)
    }

    /// Python that connects to `path`, writes one line (`after` decides what comes next) and
    /// then waits for the socket to close.
    private static func connecting(_ path: String, then after: String = "import time\ntime.sleep(30)") -> [String] {
        ["-c", "import os, socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(\(pythonString(path)))\ns.sendall(b'x')\n\(after)\n"]
    }

    private static func pythonString(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "\\'") + "'" }

    /// A Python child connected to `l` (then running `after`), and the accepted connection once
    /// the child has written its byte; the caller stops the child and closes the connection.
    private static func connected(_ l: Listener, then after: String = "import time\ntime.sleep(30)",
                                  environment: [String] = ["PATH=/usr/bin:/bin"]) throws -> (ChildProcess, Int32) {
        let child = try ChildProcess.spawn(python, arguments: connecting(l.path, then: after), environment: environment)
        do {
            let c = try l.accept()
            do { try waitForByte(c) } catch { close(c); throw error }
            return (child, c)
        } catch {
            child.stop()
            throw error
        }
    }

    /// Reads the one byte the child writes once connected.
    private static func waitForByte(_ fd: Int32) throws {
        UnixSocket.setReceiveTimeout(fd, seconds: 10)
        var b: UInt8 = 0
        guard recv(fd, &b, 1, 0) == 1 else { throw Failure("the child wrote nothing") }
    }

    @Test func identifiesTheExecutableOfAConnectedChild() throws {
        let l = try Listener()
        let (child, c) = try Self.connected(l)
        defer { child.stop(); close(c) }
        let peer = try Self.seen(c)
        #expect(peer.pid == child.pid)
        #expect(peer.uid == getuid())
        let real = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child.pid)/exe")
        #expect(peer.path == real)
        #expect(peer.path.hasSuffix("/python3.11"), "python3 runs \(peer.path)")
        #expect(peer.executable == ExecutableIdentity(path: Self.python))
        #expect(!peer.replaced)
        #expect(peer.variables.isEmpty)
        #expect(peer.holding == .own)
    }

    @Test func namesTheVariablesThatLoadOtherCodeButNotTheirValues() throws {
        let l = try Listener()
        let env = ["PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=/nonexistent-sk", "GTK_MODULES=sk-evil", "HOME=/tmp", "LD_PRELOAD="]
        let (child, c) = try Self.connected(l, environment: env)
        defer { child.stop(); close(c) }
        // An empty LD_PRELOAD loads nothing; the two set ones are named, in order.
        #expect(try Self.seen(c).variables == ["GTK_MODULES", "LD_LIBRARY_PATH"])
    }

    @Test func aPeerThatHasExitedIsNotIdentified() throws {
        let l = try Listener()
        let child = try ChildProcess.spawn(Self.python, arguments: Self.connecting(l.path, then: "sys.exit(0)"), environment: ["PATH=/usr/bin:/bin"])
        let c = try l.accept()
        defer { close(c) }
        try Self.waitForByte(c)
        _ = child.wait()   // exited and reaped: its pid may now be anyone's
        #expect(throws: PeerProcessError.processGone(pid: child.pid)) { try Self.seen(c) }
    }

    /// A process that connects and then `execve`s another program is identified as what it runs
    /// now: the check names the executable at the time of the check, which is why a host
    /// binding checks at `hello` and SECURITY.md says what a descriptor kept across `execve`
    /// can do.
    @Test func aPeerThatExecsIsIdentifiedAsWhatItRunsNow() throws {
        let l = try Listener()
        let after = "os.set_inheritable(s.fileno(), True)\nos.execv('/bin/sleep', ['sleep', '30'])"
        let (child, c) = try Self.connected(l, then: after)
        defer { child.stop(); close(c) }
        let deadline = Date().addingTimeInterval(10)
        var path = ""
        while Date() < deadline {
            path = (try? Self.seen(c).path) ?? ""
            if path.hasSuffix("/sleep") { break }
            usleep(20_000)
        }
        #expect(path.hasSuffix("/sleep"), "identified as \(path)")
    }

    /// The trick a host binding must not fall for: connect, hand the connection to a child,
    /// then `execve` a host that closes what it inherits. The kernel names the host as the peer,
    /// but the host does not hold the connection: the child does.
    @Test func aConnectionHandedToAChildBeforeAnExecIsNotHeldByThePeer() throws {
        let l = try Listener()
        // The socket is not inheritable (Python's default): the exec'd program does not keep it.
        let after = "pid = os.fork()\nif pid == 0:\n    import time\n    time.sleep(30)\nelse:\n    os.execv('/bin/sleep', ['sleep', '30'])"
        let (child, c) = try Self.connected(l, then: after)
        defer { child.stop(); close(c) }
        let deadline = Date().addingTimeInterval(10)
        var seen = try Self.seen(c)
        while Date() < deadline, !seen.path.hasSuffix("/sleep") { usleep(20_000); seen = try Self.seen(c) }
        #expect(seen.pid == child.pid)
        #expect(seen.path.hasSuffix("/sleep"), "identified as \(seen.path)")
        #expect(seen.holding == .notHeld)
    }

    @Test func aConnectionHeldOnlyAsStandardInputIsSaidToBe() throws {
        let l = try Listener()
        let after = "os.dup2(s.fileno(), 0)\ns.close()\nimport time\ntime.sleep(30)"
        let (child, c) = try Self.connected(l, then: after)
        defer { child.stop(); close(c) }
        let deadline = Date().addingTimeInterval(10)
        var seen = try Self.seen(c)
        while Date() < deadline, seen.holding == .own { usleep(20_000); seen = try Self.seen(c) }
        #expect(seen.holding == .standardStreamsOnly)
    }

    @Test func anExecutableReplacedOnDiskIsSaidToBe() throws {
        let l = try Listener()
        let copy = l.dir + "/host"
        try FileManager.default.copyItem(atPath: "/bin/sleep", toPath: copy)
        // A copy of sleep that connects is not at hand: python connects, then execs the copy.
        let after = "os.set_inheritable(s.fileno(), True)\nos.execv(\(Self.pythonString(copy)), ['host', '30'])"
        let (child, c) = try Self.connected(l, then: after)
        defer { child.stop(); close(c) }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? Self.seen(c).path) != copy { usleep(20_000) }
        let before = try Self.seen(c)
        #expect(before.path == copy)
        #expect(!before.replaced)
        // Another file renamed over the path: the process still runs the old one.
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: copy + ".new")
        #expect(rename(copy + ".new", copy) == 0)
        let after2 = try Self.seen(c)
        #expect(after2.replaced)
        // The same file (its link count dropped, so its change time moved).
        #expect(after2.executable.inode == before.executable.inode && after2.executable.device == before.executable.device)
        #expect(after2.executable != ExecutableIdentity(path: copy))
    }

    /// A file rewritten in place at the same size, its modification time set back (which any
    /// owner may do), is another file by identity: the change time moved, and no unprivileged
    /// call sets it back (issue 45, defect 3).
    @Test func aRewriteInPlaceWithTheTimeSetBackIsAnotherIdentity() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-identity-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        mkdir(dir, 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/host"
        try "#!/bin/sh\necho one\n".write(toFile: path, atomically: true, encoding: .utf8)
        // A modification time the rewrite below sets again.
        let setBack = { try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: path) }
        try setBack()
        let first = try #require(ExecutableIdentity(path: path))
        usleep(20_000)
        let fd = open(path, O_WRONLY)
        let bytes = Array("#!/bin/sh\necho two\n".utf8)
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        try setBack()
        let second = try #require(ExecutableIdentity(path: path))
        #expect(second.device == first.device && second.inode == first.inode && second.size == first.size)
        #expect(second.modifiedNanoseconds == first.modifiedNanoseconds, "the modification time was set back")
        #expect(second != first, "a rewrite in place kept the identity")
    }

    @Test func aSocketWithoutAPeerHasNoCredentials() throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        #expect(throws: PeerProcessError.noCredentials) { try Self.seen(fd) }
    }
}
