#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SiteKeepSystem

/// What a cache keyed by file stamps relies on: a write changes the stamp, nothing else does,
/// and a stamp younger than the margin is not trusted (coarse file clocks).
@Suite struct FileStampTests {
    @Test func aWriteChangesTheStampAndAFreshStampIsNotSettled() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stamp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        defer { unlink(path) }
        #expect(FileStamp.of(path) == nil, "nothing there: no stamp")
        let fd = try open(path)
        try FileIO.writeAll(fd, Array("one".utf8))
        close(fd)
        let first = try #require(FileStamp.of(path))
        #expect(FileStamp.of(path) == first, "reading again changes nothing")
        // Just written: not settled for a one-minute margin, settled for none.
        #expect(!first.isSettled(margin: 60_000_000_000))
        #expect(first.isSettled(margin: 0))
        // Replaced atomically with bytes of the same length: a new inode, another stamp.
        try AtomicFile.replace(path, with: Array("two".utf8))
        #expect(FileStamp.of(path) != first)
    }

    private func open(_ path: String) throws -> Int32 {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        return fd
    }
}
