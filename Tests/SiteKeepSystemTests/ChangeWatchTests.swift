import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import SiteKeepSystem

/// ``ChangeWatch``: its generation stays while nothing changes in the watched folders and moves
/// with every kind of change a cache must see (a file written and closed, replaced by rename,
/// created, removed); a watched folder moved or removed makes it lost for good (every call a
/// new generation, so nothing is served by it again); and it is refused where inotify would not
/// hear every change.
@Suite struct ChangeWatchTests {
    static func folder() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/sitekeep-watch-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: try #require(made))
    }

    @Test func theGenerationMovesWithEveryChangeAndOnlyThen() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try AtomicFile.replace(dir + "/ref", with: Array("one".utf8))
        let watch = try #require(ChangeWatch(folders: [dir], mask: ChangeWatch.everyChange), "inotify on \(dir)")
        var last = watch.generation()
        #expect(watch.generation() == last && watch.drain() == .none, "nothing changed")
        let changes: [(String, () throws -> Void)] = [
            ("replaced by rename", { try AtomicFile.replace(dir + "/ref", with: Array("two".utf8)) }),
            ("written in place, same size", {
                let fd = open(dir + "/ref", O_WRONLY)
                _ = "six".withCString { write(fd, $0, 3) }
                close(fd)
            }),
            ("created", { try AtomicFile.replace(dir + "/new", with: [1]) }),
            ("removed", { #expect(unlink(dir + "/new") == 0) }),
            ("a folder made", { #expect(mkdir(dir + "/sub", 0o700) == 0) }),
        ]
        for (what, change) in changes {
            try change()
            let now = watch.generation()
            #expect(now != last, "not seen: \(what)")
            #expect(watch.generation() == now, "seen twice: \(what)")
            last = now
        }
        // Inside a subfolder is not watched (inotify is not recursive): callers watch each folder.
        try AtomicFile.replace(dir + "/sub/deeper", with: [1])
        #expect(watch.generation() == last)
    }

    @Test func aWatchedFolderRemovedOrMovedIsLostForGood() throws {
        for removal in ["removed", "moved"] {
            let dir = try Self.folder()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try #require(mkdir(dir + "/watched", 0o700) == 0)
            let watch = try #require(ChangeWatch(folders: [dir + "/watched"]))
            _ = watch.generation()
            if removal == "removed" { #expect(rmdir(dir + "/watched") == 0) } else { #expect(rename(dir + "/watched", dir + "/elsewhere") == 0) }
            #expect(watch.drain() == .lost, "\(removal)")
            let a = watch.generation(), b = watch.generation()
            #expect(a != b, "a lost watch serves nothing (\(removal))")
            #expect(watch.drain() == .lost)
        }
    }

    @Test func onlyFileSystemsThatReportEveryChangeAreWatched() throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(ChangeWatch.reportsEveryChange(dir), "the temporary folder's file system (\(dir))")
        // procfs (as NFS, SMB, FUSE or 9p) changes behind inotify's back: refused.
        #expect(!ChangeWatch.reportsEveryChange("/proc/self"))
        #expect(ChangeWatch(folders: [dir, "/proc/self"]) == nil)
        #expect(ChangeWatch(folders: [dir + "/missing"]) == nil)
        let watch = try #require(ChangeWatch(folders: [dir]))
        #expect(!watch.add("/proc/self"))
    }
}
