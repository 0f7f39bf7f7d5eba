#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
import SiteKeepSocket

/// The shared listener's threads: the thread that accepted a connection serves it, a thread
/// whose connection ended is reused by the next one instead of a new thread being made, parked
/// threads end after their idle time, and a stop ends every thread at once.
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

    /// Connects, sends `text`, reads the echo; the connection stays open until `close`.
    private static func open(_ path: String) throws -> Int32 {
        try UnixSocket.connect(path: path, remedy: "test")
    }

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

    @Test func connectionsOneAfterAnotherReuseTheSameTwoThreads() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let listener = try SocketListener(path: dir + "/s.sock")
        listener.start(Self.echo)
        defer { listener.shutdown() }
        for i in 0..<40 {
            let fd = try Self.open(dir + "/s.sock")
            #expect(Self.roundTrip(fd, "ping \(i)") == "ping \(i)")
            close(fd)
            // The serving thread parks once the handler has returned.
            #expect(Self.waitUntil { listener.parkedThreads == 1 })
            #expect(listener.liveThreads == 2)
        }
        // One thread accepting, one parked: a thread per connection would have made 40.
        #expect(listener.startedThreads == 2, "started \(listener.startedThreads) threads for 40 connections one after another")
    }

    @Test func connectionsAtOnceEachHaveAThreadAndIdleOnesEnd() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let listener = try SocketListener(path: dir + "/s.sock", idleThreads: .milliseconds(300))
        listener.start(Self.echo)
        defer { listener.shutdown() }
        let fds = try (0..<6).map { _ in try Self.open(dir + "/s.sock") }
        // Every connection is answered while all six stay open: none waits for another.
        for (i, fd) in fds.enumerated() { #expect(Self.roundTrip(fd, "c\(i)") == "c\(i)") }
        #expect(listener.liveThreads == 7, "six serving and one accepting")
        for fd in fds { close(fd) }
        // The parked ones end after their idle time; the accepting one stays.
        #expect(Self.waitUntil { listener.liveThreads == 1 }, "\(listener.liveThreads) threads left")
        let fd = try Self.open(dir + "/s.sock")
        #expect(Self.roundTrip(fd, "after") == "after")
        close(fd)
    }

    @Test func aStopEndsParkedAndServingThreadsAndRemovesTheSocket() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/s.sock"
        let stops = Mutex(0)
        let listener = try SocketListener(path: path, onStopped: { stops.withLock { $0 += 1 } })
        listener.start(Self.echo)
        let burst = try (0..<4).map { _ in try Self.open(path) }
        for fd in burst { #expect(Self.roundTrip(fd, "x") == "x") }
        for fd in burst.dropFirst() { close(fd) }   // three park; one stays connected
        #expect(Self.waitUntil { listener.liveThreads == 5 })
        let t0 = Date()
        listener.shutdown()   // drains the open connection: its handler sees end of stream
        // Parked threads wait 30 s for work by default: a stop must not wait for that.
        #expect(Date().timeIntervalSince(t0) < 5)
        #expect(listener.liveThreads == 0)
        #expect(stops.withLock { $0 } == 1)
        #expect(!FileManager.default.fileExists(atPath: path))
        close(burst[0])
    }
}
