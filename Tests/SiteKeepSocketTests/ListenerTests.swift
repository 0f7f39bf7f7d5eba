#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
import SiteKeepSocket
import SiteKeepTestSupport

/// The shared listener's threads: each connection is served on a thread of its own while a
/// single other thread waits for the next one, a thread ends with its connection, and a stop
/// drains open connections, ends every thread and removes the socket. The threads are counted
/// by a ``ThreadCounter`` each listener is made with.
@Suite struct ListenerTests {
    private static func folder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-listener-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return dir.path
    }

    /// An echo handler: every chunk received is sent back, until the peer closes.
    private static func echo(_ c: SocketConnection) {
        var chunk = [UInt8](repeating: 0, count: 256)
        while true {
            let n = chunk.withUnsafeMutableBytes { c.receive(into: $0) }
            guard n > 0 else { return }
            guard c.writer.send(Array(chunk[0..<n]), terminator: nil) else { return }
            c.answered()
        }
    }

    private static func open(_ path: String) throws -> Int32 {
        try UnixSocket.connect(path: path, remedy: "test")
    }

    /// Sends `text` and reads the echo (nil at end of stream or after 10 s).
    private static func roundTrip(_ fd: Int32, _ text: String) -> String? {
        guard UnixSocket.writeAll(fd, Array(text.utf8)) else { return nil }
        UnixSocket.setReceiveTimeout(fd, seconds: 10)
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    private static func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    @Test func connectionsOneAfterAnotherEachEndTheirThread() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let threads = ThreadCounter()
        let listener = try SocketListener(path: dir + "/s.sock", observer: threads)
        listener.start(Self.echo)
        defer { listener.shutdown() }
        #expect(Self.waitUntil { threads.live == 1 })
        for i in 0..<40 {
            let fd = try Self.open(dir + "/s.sock")
            #expect(Self.roundTrip(fd, "ping \(i)") == "ping \(i)")
            #expect(threads.live == 2, "one serving, one waiting for the next connection")
            close(fd)
            #expect(Self.waitUntil { threads.live == 1 }, "the serving thread ended with its connection")
        }
    }

    @Test func connectionsAtOnceEachHaveAThread() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let threads = ThreadCounter()
        let listener = try SocketListener(path: dir + "/s.sock", observer: threads)
        listener.start(Self.echo)
        defer { listener.shutdown() }
        let fds = try (0..<6).map { _ in try Self.open(dir + "/s.sock") }
        // Answered in the reverse order of connecting: none waits for another to end.
        for (i, fd) in fds.enumerated().reversed() { #expect(Self.roundTrip(fd, "c\(i)") == "c\(i)") }
        #expect(threads.live == 7, "six serving and one accepting")
        for fd in fds { close(fd) }
        #expect(Self.waitUntil { threads.live == 1 }, "\(threads.live) threads left")
        let fd = try Self.open(dir + "/s.sock")
        #expect(Self.roundTrip(fd, "after") == "after")
        close(fd)
    }

    @Test func aStopDrainsOpenConnectionsEndsEveryThreadAndRemovesTheSocket() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/s.sock"
        let stops = Mutex(0)
        let threads = ThreadCounter()
        let listener = try SocketListener(path: path, observer: threads, onStopped: { stops.withLock { $0 += 1 } })
        listener.start(Self.echo)
        let open = try (0..<3).map { _ in try Self.open(path) }
        for fd in open { #expect(Self.roundTrip(fd, "x") == "x") }
        #expect(threads.live == 4)
        listener.shutdown()   // each open connection's handler sees end of stream
        #expect(threads.live == 0 && threads.started == 4)
        #expect(stops.withLock { $0 } == 1)
        #expect(!FileManager.default.fileExists(atPath: path))
        for fd in open {
            var b: UInt8 = 0
            #expect(recv(fd, &b, 1, 0) == 0, "the listener closed the connection")
            close(fd)
        }
        #expect((try? Self.open(path)) == nil, "nothing listens any more")
    }
}
