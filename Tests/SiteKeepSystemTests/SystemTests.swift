#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
import SiteKeepTestSupport
@testable import SiteKeepSystem

private func scratchFolder() throws -> String {
    var template = Array((NSTemporaryDirectory() + "/sitekeep-system-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil)
    return String(cString: made!)
}

private func mode(_ path: String) -> UInt32 {
    var st = stat()
    _ = lstat(path, &st)
    return UInt32(st.st_mode & 0o7777)
}

private func entries(_ folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
}

@Suite struct AtomicFileTests {
    @Test func replacesTheContentWithTheModeAskedWhateverTheUmask() throws {
        let dir = try scratchFolder()
        let file = dir + "/data.json"
        let old = umask(0)
        defer { umask(old) }
        try AtomicFile.replace(file, with: Array("first".utf8))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "first")
        #expect(mode(file) == 0o600)
        try AtomicFile.replace(file, with: Array("second".utf8), mode: 0o644)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "second")
        #expect(mode(file) == 0o644)
        #expect(entries(dir) == ["data.json"], "no temporary file is left behind")
    }

    @Test func aSymbolicLinkAtTheTargetIsReplacedNotFollowed() throws {
        let dir = try scratchFolder()
        let victim = dir + "/victim"
        try "keep me".write(toFile: victim, atomically: false, encoding: .utf8)
        #expect(symlink(victim, dir + "/link") == 0)
        try AtomicFile.replace(dir + "/link", with: Array("new".utf8))
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep me")
        #expect(try String(contentsOfFile: dir + "/link", encoding: .utf8) == "new")
        var st = stat()
        #expect(lstat(dir + "/link", &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG)
    }

    @Test func aFailedReplaceLeavesTheTargetAndNoTemporaryFile() throws {
        let dir = try scratchFolder()
        let file = dir + "/data"
        try AtomicFile.replace(file, with: Array("good".utf8))
        // A folder in the way of the rename: rename(2) of a file over a folder fails (EISDIR).
        let blocked = dir + "/blocked"
        #expect(mkdir(blocked, 0o700) == 0)
        #expect(throws: SystemError.self) { try AtomicFile.replace(blocked, with: Array("x".utf8)) }
        do {
            try AtomicFile.replace(blocked, with: Array("x".utf8))
        } catch {
            #expect(error.description.contains(blocked), "the error names the file: \(error)")
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "good")
        #expect(entries(dir) == ["blocked", "data"])
    }

    @Test func writersRacingOnOneFileLeaveOneWholeVersion() async throws {
        let dir = try scratchFolder()
        let file = dir + "/race"
        let versions = (0..<16).map { i in [UInt8](repeating: UInt8(65 + i), count: 64 << 10) }
        await withTaskGroup(of: Void.self) { group in
            for v in versions { group.addTask { for _ in 0..<8 { try? AtomicFile.replace(file, with: v) } } }
        }
        let final = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        #expect(versions.contains(final), "the file is exactly one writer's version, never a mix")
        #expect(entries(dir) == ["race"])
    }

    /// A vault makes its temporary files in its own tmp folder (never where sgit lists files),
    /// named `PID-….tmp` so a later run can remove a killed writer's leftovers.
    @Test func aTemporaryFolderHoldsTheTemporaryFileAndIsLeftEmpty() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0)
        #expect(AtomicFile.temporaryPath(for: dir + "/obj", in: tmp).hasPrefix("\(tmp)/\(getpid())-"))
        #expect(AtomicFile.temporaryPath(for: dir + "/obj", in: tmp).hasSuffix(".tmp"))
        try AtomicFile.replace(dir + "/obj", with: Array("v".utf8), temporaryFolder: tmp, syncFolder: false)
        #expect(try String(contentsOfFile: dir + "/obj", encoding: .utf8) == "v")
        #expect(entries(dir) == ["obj", "tmp"])
        #expect(entries(tmp) == [])
    }

    /// A batch (a pull's objects): every file whole with its mode, across folders, with fewer
    /// files than writers and more, and the temporary folder left empty.
    @Test func aBatchReplacesEveryFileWholeWithItsMode() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0 && mkdir(dir + "/a", 0o700) == 0 && mkdir(dir + "/b", 0o700) == 0)
        for count in [1, 2, AtomicFile.syncWidth + 1, 300] {
            let files = (0..<count).map { i in (path: "\(dir)/\(i % 2 == 0 ? "a" : "b")/f\(i)", bytes: Array("file \(i) of \(count)".utf8)) }
            try AtomicFile.replaceAll(files, mode: 0o640, temporaryFolder: tmp)
            for f in files {
                #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: f.path))) == f.bytes, "\(f.path) of \(count)")
                #expect(mode(f.path) == 0o640)
            }
            #expect(entries(tmp) == [], "no temporary file is left (\(count) files)")
        }
        try AtomicFile.replaceAll([], temporaryFolder: tmp)
    }

    /// A rename that fails part-way: the files before it are replaced, the one that failed and
    /// those after it are as they were, no temporary file is left, and the error names the file.
    @Test func aBatchThatFailsPartWayLeavesTheRestAsTheyWere() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0)
        for count in [3, 12] {
            for i in 0..<count { try AtomicFile.replace("\(dir)/f\(i)", with: Array("old".utf8)) }
            let blocked = dir + "/blocked\(count)"
            #expect(mkdir(blocked, 0o700) == 0)   // rename(2) of a file over a folder fails
            var files = (0..<count).map { i in (path: "\(dir)/f\(i)", bytes: Array("new".utf8)) }
            files.insert((path: blocked, bytes: Array("x".utf8)), at: count / 2)
            do {
                try AtomicFile.replaceAll(files, temporaryFolder: tmp)
                Issue.record("a rename over a folder succeeded")
            } catch {
                #expect(error.description.contains(blocked), "the error names the file: \(error)")
            }
            for i in 0..<count {
                let text = try String(contentsOfFile: "\(dir)/f\(i)", encoding: .utf8)
                #expect(text == (i < count / 2 ? "new" : "old"), "f\(i) of \(count)")
            }
            #expect(entries(tmp) == [])
        }
    }

    /// A background batch: nothing is visible under its final name before commit, files added
    /// from several threads at once all land whole, and the temporary folder is left empty.
    @Test func aBackgroundBatchShowsNothingBeforeCommitAndEverythingAfter() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0 && mkdir(dir + "/out", 0o700) == 0)
        let batch = AtomicFile.Batch(mode: 0o640, temporaryFolder: tmp, width: 3)
        let count = 400
        _ = SystemThread.map(4, width: 4) { t in
            for i in stride(from: t, to: count, by: 4) { batch.add("\(dir)/out/f\(i)", Array("file \(i)".utf8)) }
        }
        #expect(entries(dir + "/out") == [], "nothing is in place before commit")
        try batch.commit()
        #expect(entries(dir + "/out").count == count)
        for i in 0..<count {
            #expect(try String(contentsOfFile: "\(dir)/out/f\(i)", encoding: .utf8) == "file \(i)")
            #expect(mode("\(dir)/out/f\(i)") == 0o640)
        }
        #expect(entries(tmp) == [])
    }

    /// A batch fed in bursts (a fetch, one burst per answer of the server): its helpers wait
    /// for the next burst instead of ending and being started again, commit still waits for
    /// every queued file to be written and fsynced before it puts any in place, and helpers
    /// that outwaited their linger are started again for files added later.
    @Test func aBatchFedInBurstsKeepsItsHelpersAndCommitWritesEveryFile() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0 && mkdir(dir + "/out", 0o700) == 0)
        let helpers = EventCounter()
        let batch = AtomicFile.Batch(temporaryFolder: tmp, width: 4, onHelperStarted: helpers.observer)
        var count = 0
        for burst in 0..<5 {
            for _ in 0..<40 { batch.add("\(dir)/out/f\(count)", Array("file \(count)".utf8)); count += 1 }
            usleep(burst == 3 ? UInt32(AtomicFile.Batch.lingerNs / 1000 + 100_000) : 20_000)
        }
        #expect(helpers.value <= 8, "helpers wait between bursts (started \(helpers.value))")
        #expect(helpers.value >= 2, "helpers that outwaited their linger are started again (started \(helpers.value))")
        // The last burst is committed at once, most of it still queued.
        for _ in 0..<200 { batch.add("\(dir)/out/f\(count)", Array("file \(count)".utf8)); count += 1 }
        #expect(entries(dir + "/out") == [], "nothing is in place before commit")
        try batch.commit()
        #expect(entries(dir + "/out").count == count)
        for i in 0..<count { #expect(try String(contentsOfFile: "\(dir)/out/f\(i)", encoding: .utf8) == "file \(i)") }
        #expect(entries(tmp) == [])
    }

    /// A scratch folder with `f0`…`f9` holding "old", a folder `blocked` (a file renamed over
    /// it fails), and an empty `tmp` for a batch's temporary files.
    func tenOldFilesAndAFolder() throws -> (dir: String, tmp: String, count: Int) {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0 && mkdir(dir + "/blocked", 0o700) == 0)
        for i in 0..<10 { try AtomicFile.replace("\(dir)/f\(i)", with: Array("old".utf8)) }
        return (dir, tmp, 10)
    }

    /// `.reversed` puts the last added in place first: a rename that fails part-way leaves the
    /// files added after it replaced and those added before it as they were.
    @Test func aReversedBatchRenamesTheLastAddedFirst() throws {
        let (dir, tmp, count) = try tenOldFilesAndAFolder()
        let batch = AtomicFile.Batch(temporaryFolder: tmp)
        for i in 0..<count {
            if i == count / 2 { batch.add(dir + "/blocked", Array("x".utf8)) }   // a file over a folder: rename fails
            batch.add("\(dir)/f\(i)", Array("new".utf8))
        }
        #expect(throws: SystemError.self) { try batch.commit(order: .reversed) }
        for i in 0..<count {
            #expect(try String(contentsOfFile: "\(dir)/f\(i)", encoding: .utf8) == (i >= count / 2 ? "new" : "old"), "f\(i)")
        }
        #expect(entries(tmp) == [])
    }

    /// `.ranked` puts files in place lowest rank first, whatever order they were added in: a
    /// rename that fails part-way leaves exactly the files of lower rank replaced.
    @Test func aRankedBatchRenamesTheLowestRankFirst() throws {
        let (dir, tmp, count) = try tenOldFilesAndAFolder()
        let batch = AtomicFile.Batch(temporaryFolder: tmp)
        // Added in an order unrelated to rank: rank of f<i> is (i * 7) % 10, `blocked` ranks 5.
        for i in (0..<count).reversed() { batch.add("\(dir)/f\(i)", Array("new".utf8)) }
        batch.add(dir + "/blocked", Array("x".utf8))
        let rank: @Sendable (String) -> Int = { path in
            path.hasSuffix("/blocked") ? 5 : (Int(path.split(separator: "f").last!)! * 7) % 10
        }
        #expect(throws: SystemError.self) { try batch.commit(order: .ranked(rank)) }
        for i in 0..<count {
            let r = (i * 7) % 10
            // Equal rank (5): the last added first, so `blocked` (added last) failed before f5.
            #expect(try String(contentsOfFile: "\(dir)/f\(i)", encoding: .utf8) == (r < 5 ? "new" : "old"), "f\(i) rank \(r)")
        }
        #expect(entries(tmp) == [])
    }

    /// A file added with `replaceExisting: false` never replaces one already there (a stored
    /// object), and is placed when none is; the others replace as usual.
    @Test func aBatchNeverReplacesAFileItWasToldToKeep() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0)
        try AtomicFile.replace(dir + "/kept", with: Array("first".utf8))
        try AtomicFile.replace(dir + "/replaced", with: Array("first".utf8))
        let batch = AtomicFile.Batch(temporaryFolder: tmp)
        batch.add(dir + "/kept", Array("second".utf8), replaceExisting: false)
        batch.add(dir + "/new", Array("second".utf8), replaceExisting: false)
        batch.add(dir + "/replaced", Array("second".utf8))
        try batch.commit()
        #expect(try String(contentsOfFile: dir + "/kept", encoding: .utf8) == "first")
        #expect(try String(contentsOfFile: dir + "/new", encoding: .utf8) == "second")
        #expect(try String(contentsOfFile: dir + "/replaced", encoding: .utf8) == "second")
        #expect(entries(tmp) == [])
        // The call itself: refuses an existing target and keeps the temporary file.
        try AtomicFile.replace(tmp + "/t", with: Array("t".utf8))
        #expect(try AtomicFile.Batch.placeUnlessPresent(tmp + "/t", dir + "/kept") == false)
        #expect(entries(tmp) == ["t"])
        #expect(try AtomicFile.Batch.placeUnlessPresent(tmp + "/t", dir + "/other") == true)
        #expect(entries(tmp) == [])
        #expect(try String(contentsOfFile: dir + "/other", encoding: .utf8) == "t")
    }

    /// Abandoned, or released without a commit: no target changes and no temporary file is
    /// left. A file that cannot be written fails the commit, and nothing is put in place.
    @Test func anAbandonedOrFailedBatchChangesNothing() throws {
        let dir = try scratchFolder()
        let tmp = dir + "/tmp"
        #expect(mkdir(tmp, 0o700) == 0)
        try AtomicFile.replace(dir + "/f", with: Array("old".utf8))
        let abandoned = AtomicFile.Batch(temporaryFolder: tmp)
        for i in 0..<50 { abandoned.add("\(dir)/n\(i)", Array("new".utf8)) }
        abandoned.add(dir + "/f", Array("new".utf8))
        abandoned.abandon()
        #expect(entries(dir) == ["f", "tmp"] && entries(tmp) == [])
        #expect(try String(contentsOfFile: dir + "/f", encoding: .utf8) == "old")
        // Committing what was abandoned is refused, and places nothing.
        let late = #expect(throws: SystemError.self) { try abandoned.commit() }
        #expect(late?.reason?.contains("already committed or abandoned") == true)
        #expect(entries(dir) == ["f", "tmp"] && entries(tmp) == [])
        do {
            let dropped = AtomicFile.Batch(temporaryFolder: tmp)
            for i in 0..<50 { dropped.add("\(dir)/n\(i)", Array("new".utf8)) }
            dropped.add(dir + "/f", Array("new".utf8))
        }
        // The release itself abandons: when it returns, the helpers have stopped and their
        // files are gone (not when the last one has waited out its linger for more work).
        #expect(entries(dir) == ["f", "tmp"] && entries(tmp) == [])
        let failing = AtomicFile.Batch(temporaryFolder: dir + "/no-such-folder")
        failing.add(dir + "/f", Array("new".utf8))
        failing.add(dir + "/g", Array("new".utf8))
        #expect(throws: SystemError.self) { try failing.commit() }
        #expect(entries(dir) == ["f", "tmp"])
        #expect(try String(contentsOfFile: dir + "/f", encoding: .utf8) == "old")
    }

    @Test func folderOfAPath() {
        #expect(AtomicFile.folder(of: "/a/b/c") == "/a/b")
        #expect(AtomicFile.folder(of: "/c") == "/")
        #expect(AtomicFile.folder(of: "c") == ".")
    }
}

@Suite struct FileIOTests {
    /// `rename` moves a file over another; a failure names both paths; `sync` of a bad
    /// descriptor is its error number.
    @Test func renameAndSync() throws {
        let dir = try scratchFolder()
        try AtomicFile.replace(dir + "/a", with: [1])
        try AtomicFile.replace(dir + "/b", with: [2])
        try FileIO.rename(dir + "/a", to: dir + "/b")
        #expect(try FileIO.readRegularFile(dir + "/b", limit: 10) == .bytes([1]))
        #expect(try FileIO.readRegularFile(dir + "/a", limit: 10) == .missing)
        #expect { try FileIO.rename(dir + "/a", to: dir + "/c") } throws: { error in
            "\(error)" == "cannot rename \(dir)/a to \(dir)/c: No such file or directory"
        }
        #expect(throws: Errno(rawValue: EBADF)) { try FileIO.sync(-1) }
    }

    @Test func readsRegularFilesOnlyWithinTheLimitAndNeverThroughALink() throws {
        let dir = try scratchFolder()
        #expect(try FileIO.readRegularFile(dir + "/none", limit: 10) == .missing)
        #expect(try FileIO.readRegularFile(dir + "/none/deeper", limit: 10) == .missing)
        try AtomicFile.replace(dir + "/small", with: [1, 2, 3])
        #expect(try FileIO.readRegularFile(dir + "/small", limit: 3) == .bytes([1, 2, 3]))
        #expect(throws: SystemError.self) { try FileIO.readRegularFile(dir + "/small", limit: 2) }
        #expect(symlink(dir + "/small", dir + "/link") == 0)
        do {
            _ = try FileIO.readRegularFile(dir + "/link", limit: 10)
            Issue.record("a symbolic link was followed")
        } catch {
            #expect(error.description.contains("symbolic link"))
        }
        #expect(mkfifo(dir + "/fifo", 0o600) == 0)
        #expect(throws: SystemError.self) { try FileIO.readRegularFile(dir + "/fifo", limit: 10) }
        #expect(throws: SystemError.self) { try FileIO.readRegularFile(dir, limit: 10) }
    }

    /// A file a person named: regular files and live pipes are read; a FIFO nobody writes to,
    /// a device and a folder are refused at once (a watchdog unblocks a regression from 10 s on,
    /// which then fails the time check instead of hanging).
    @Test func readNamedInputNeverWaitsForAWriterThatIsNotThere() throws {
        let dir = try scratchFolder()
        var buffer = [UInt8](repeating: 0, count: 64)
        func read(_ path: String, acceptPipes: Bool = true) throws(SystemError) -> [UInt8] {
            let r = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try FileIO.readNamedInput(path, into: raw, acceptPipes: acceptPipes) }
            }
            return Array(buffer[0..<(try r.get())])
        }
        try AtomicFile.replace(dir + "/file", with: Array("text".utf8))
        #expect(symlink(dir + "/file", dir + "/link") == 0)
        #expect(try read(dir + "/file") == Array("text".utf8))
        #expect(try read(dir + "/link") == Array("text".utf8), "a path a person typed may be a link")
        let fifo = dir + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let watchdog = FIFOWatchdog(fifo)
        defer { watchdog.stop() }
        let start = ContinuousClock.now
        for (path, reason) in [(fifo, "nothing was written"), ("/dev/zero", "device"), (dir, "folder")] {
            do {
                _ = try read(path)
                Issue.record("\(path) was read")
            } catch {
                #expect(error.description.contains(path) && error.description.contains(reason), "\(error)")
            }
        }
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(throws: SystemError.self) { try read(fifo, acceptPipes: false) }
        // A pipe whose writer writes late is waited on.
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let writer = fds[1]
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { _ = write(writer, "late", 4); close(writer) }
        #expect(try read("/proc/self/fd/\(fds[0])") == Array("late".utf8))
    }

    @Test func writeAllWritesEverythingThroughAPipe() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }
        let readEnd = fds[0]
        let group = DispatchGroup()
        let box = ReceiveBox()
        DispatchQueue.global().async(group: group) {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                box.append(chunk[0..<n])
            }
        }
        try FileIO.writeAll(fds[1], bytes)
        close(fds[1])
        group.wait()
        close(fds[0])
        #expect(box.bytes == bytes)
    }

    @Test func writeAllReportsTheErrorNumber() {
        #expect(throws: Errno(rawValue: EBADF)) { try FileIO.writeAll(-1, [1]) }
    }
}

private final class ReceiveBox: @unchecked Sendable {
    // @unchecked: written by one reader thread, read after it finished (DispatchGroup.wait).
    var bytes: [UInt8] = []
    func append(_ s: ArraySlice<UInt8>) { bytes.append(contentsOf: s) }
}

@Suite struct PrivateFolderTests {
    @Test func createsPrivateFoldersAndRefusesOpenOnesWithoutChangingThem() throws {
        let dir = try scratchFolder()
        try PrivateFolder.ensure(dir + "/a")
        #expect(mode(dir + "/a") == 0o700)
        #expect(PrivateFolder.problem(with: dir + "/a") == nil)
        try PrivateFolder.ensure(dir + "/p/q/r", createParents: true)
        #expect(mode(dir + "/p/q/r") == 0o700)

        #expect(mkdir(dir + "/open", 0o700) == 0 && chmod(dir + "/open", 0o755) == 0)
        do {
            try PrivateFolder.ensure(dir + "/open")
            Issue.record("an open folder was accepted")
        } catch {
            #expect(error.description.contains("chmod 700 \(dir)/open"))
        }
        #expect(mode(dir + "/open") == 0o755, "SiteKeep never changes the mode of a folder it did not create")
        #expect(PrivateFolder.problem(with: dir + "/open") == .openToOthers(mode: 0o755))

        try AtomicFile.replace(dir + "/file", with: [1])
        #expect(PrivateFolder.problem(with: dir + "/file") == .notADirectory)
        #expect(symlink(dir + "/a", dir + "/link") == 0)
        #expect(PrivateFolder.problem(with: dir + "/link") == .notADirectory, "a link to a private folder is not one")
        #expect(PrivateFolder.problem(with: dir + "/none") == .missing)
    }

    /// The mode asked for is the mode made, whatever the umask (tools/test runs this suite again
    /// under umask 0177, which strips the owner's search bit from a plain `mkdir`); parents made
    /// on the way stay usable by their owner, as `mkdir -p` makes them; an existing folder keeps
    /// its mode, and a link is never followed.
    @Test func makesTheModeAskedForWhateverTheUmaskAndKeepsParentsUsable() throws {
        let dir = try scratchFolder()
        #expect(try PrivateFolder.make(dir + "/exact", mode: 0o750))
        #expect(mode(dir + "/exact") == 0o750)
        #expect(try PrivateFolder.make(dir + "/exact", mode: 0o700) == false, "an existing folder is reported, not changed")
        #expect(mode(dir + "/exact") == 0o750)

        try PrivateFolder.makeParents(of: dir + "/x/y/leaf")
        for p in [dir + "/x", dir + "/x/y"] { #expect(mode(p) & 0o700 == 0o700, "\(p) is \(String(mode(p), radix: 8))") }
        #expect(PrivateFolder.problem(with: dir + "/x/y/leaf") == .missing, "only the parents are made")
        try PrivateFolder.ensure(dir + "/x/y/leaf")
        #expect(mode(dir + "/x/y/leaf") == 0o700)

        #expect(symlink(dir + "/exact", dir + "/sl") == 0)
        #expect(try PrivateFolder.make(dir + "/sl") == false)
        #expect(mode(dir + "/exact") == 0o750, "the link's target is untouched")
        try AtomicFile.replace(dir + "/plain", with: [1])
        #expect(throws: SystemError.self) { try PrivateFolder.ensure(dir + "/plain/sub") }
    }
}

@Suite struct FileLockTests {
    @Test func holdersTakeTurns() async throws {
        let dir = try scratchFolder()
        let lock = dir + "/lock"
        let counter = TwoStepCounter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<200 {
                        _ = try? FileLock.withLock(lock) { () throws(Errno) in
                            // A read-modify-write in two steps: only exclusion keeps it exact.
                            // (Each step is atomic so that ThreadSanitizer, which cannot see
                            // flock, has no data race to report; a lost update still shows.)
                            let v = counter.value.load(ordering: .relaxed)
                            sched_yield()
                            counter.value.store(v + 1, ordering: .relaxed)
                        }
                    }
                }
            }
        }
        #expect(counter.value.load(ordering: .relaxed) == 1600)
        #expect(mode(lock) == 0o600)
    }

    @Test func theBodysErrorComesBackAsIs() {
        let dir = (try? scratchFolder()) ?? "/tmp"
        do {
            try FileLock.withLock(dir + "/lock") { () throws(Errno) in throw Errno.brokenPipe }
        } catch {
            guard case .body(let e) = error else { Issue.record("expected the body's error"); return }
            #expect(e == .brokenPipe)
        }
    }

    /// A held lock keeps a non-waiting taker out (nil, not an error) until it is dropped; shared
    /// holders share; the lock of an open descriptor is taken and released in place.
    @Test func aHeldLockRefusesANonWaitingTakerAndSharedHoldersShare() throws {
        let dir = try scratchFolder()
        let path = dir + "/lock"
        var held: FileLock.Held? = try FileLock.Held(path)
        #expect(try FileLock.Held.acquire(path, wait: false) == nil)
        #expect(try FileLock.Held.acquire(path, shared: true, wait: false) == nil)
        held = nil
        var a = try FileLock.Held.acquire(path, shared: true, wait: false)
        var b = try FileLock.Held.acquire(path, shared: true, wait: false)
        #expect(a != nil && b != nil)
        #expect(try FileLock.Held.acquire(path, wait: false) == nil, "an exclusive taker waits for the shared holders")
        withExtendedLifetime((a, b, held)) {}
        (a, b) = (nil, nil)

        let fd = try FileLock.openLockFile(path)
        defer { close(fd) }
        #expect(try FileLock.lock(fd: fd, wait: false))
        #expect(try FileLock.Held.acquire(path, wait: false) == nil)
        FileLock.unlock(fd: fd)
        #expect(try FileLock.Held.acquire(path, wait: false) != nil)
        #expect(mode(path) == 0o600)
    }

    /// A lock file that cannot be opened is named in the error, with the caller's name for it.
    @Test func anUnopenableLockFileIsNamed() {
        #expect { try FileLock.Held("/nonexistent-folder/x.lock", name: "the registry lock") } throws: { error in
            "\(error)" == "cannot open the registry lock /nonexistent-folder/x.lock: No such file or directory"
        }
    }
}

/// A counter the lock test bumps in two steps (load, then store): atomic per step, not per bump.
private final class TwoStepCounter: Sendable {
    let value = Atomic<Int>(0)
}

@Suite struct ChildProcessTests {
    @Test func exitStatusesAndSignals() throws {
        #expect(try ChildProcess.run("/bin/true", arguments: []) == .exited(0))
        #expect(try ChildProcess.run("/bin/sh", arguments: ["-c", "exit 7"]) == .exited(7))
        #expect(try ChildProcess.run("/bin/sh", arguments: ["-c", "kill -9 $$"]) == .signalled(9))
        #expect(ChildProcess.Termination.signalled(9).status == 137)
        #expect(throws: SystemError.self) { try ChildProcess.run("/nonexistent/program", arguments: []) }
    }

    /// A detached child (the daemon's start) leads its own session, and its output goes to a
    /// file appended to, its standard error with it (`>>log 2>&1`).
    @Test func aDetachedChildLeadsItsSessionAndAppendsToItsLog() throws {
        let dir = try scratchFolder()
        let log = dir + "/daemon.log"
        try AtomicFile.replace(log, with: Array("before\n".utf8))
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["-c", "echo out; echo err >&2; cut -d' ' -f6 /proc/$$/stat"],
                                           stdout: .file(log, append: true), stderr: .standardOutput, detached: true)
        #expect(child.wait() == .exited(0))
        guard case .bytes(let bytes) = try FileIO.readRegularFile(log, limit: 1000) else { Issue.record("no log"); return }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        #expect(Array(lines.prefix(3)) == ["before", "out", "err"])
        #expect(lines.last.map(String.init) == "\(child.pid)", "its session id is its own pid")
        #expect(getsid(0) != child.pid)
    }

    /// A program another process still holds open for writing (a script just written, its
    /// descriptor inherited by another thread's fork that has not exec'd yet) fails to exec with
    /// ETXTBSY for a moment: the spawn tries again instead of failing (the askpass program,
    /// written by a test while other tests spawn, failed with "Text file busy").
    @Test func aProgramStillOpenForWritingIsRunOnceItIsClosed() throws {
        let dir = try scratchFolder()
        let script = dir + "/prog.sh"
        let fd = open(script, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o700)
        #expect(fd >= 0)
        #expect(fchmod(fd, 0o700) == 0, "executable whatever the umask (tools/test runs this under 0177)")
        let text = Array("#!/bin/sh\nexit 3\n".utf8)
        #expect(write(fd, text, text.count) == text.count)
        // Closed 100 ms from now, while the spawn is retrying.
        let closer = Thread { usleep(100_000); close(fd) }
        closer.start()
        #expect(try ChildProcess.run(script, arguments: []) == .exited(3))
    }

    @Test func aTimeOutStopsTheWholeProcessGroup() throws {
        let dir = try scratchFolder()
        let marker = dir + "/grandchild.pid"
        // The script starts a grandchild that would outlive it, then hangs.
        let start = ContinuousClock.now
        let result = try ChildProcess.run("/bin/sh", arguments: ["-c", "sleep 30 & echo $! > \(marker); wait"],
                                          timeout: .milliseconds(300))
        #expect(result == nil)
        #expect(ContinuousClock.now - start < .seconds(5))
        let text = try String(contentsOfFile: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let grandchild = try #require(Int32(text))
        usleep(100_000)
        // Gone, or a zombie waiting for whoever adopted it (a sandbox's pid 1 may not reap).
        let state = (try? String(contentsOfFile: "/proc/\(grandchild)/stat", encoding: .utf8))
            .flatMap { $0.split(separator: ")").last?.split(separator: " ").first }.map(String.init)
        #expect(state == nil || state == "Z", "the grandchild was stopped with its group (state \(state ?? "gone"))")
    }

    @Test func environmentIsExactlyWhatWasGiven() throws {
        let dir = try scratchFolder()
        let out = dir + "/env"
        let fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        let child = try ChildProcess.spawn("/usr/bin/env", arguments: [], environment: ["ONLY=this"], stdout: .descriptor(fd))
        #expect(child.wait() == .exited(0))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "ONLY=this\n")
    }

    @Test func captureKeepsTheStreamsAskedForWithinTheLimit() throws {
        let script = "echo out; echo err >&2; exit 3"
        let (ended, both) = try ChildProcess.capture("/bin/sh", arguments: ["-c", script], streams: .both)
        #expect(ended == .exited(3))
        #expect(String(decoding: both, as: UTF8.self) == "out\nerr\n")
        #expect(try ChildProcess.capture("/bin/sh", arguments: ["-c", script], streams: .output).1 == Array("out\n".utf8))
        #expect(try ChildProcess.capture("/bin/sh", arguments: ["-c", script], streams: .error).1 == Array("err\n".utf8))
        // More than the limit: the child still runs to the end (the rest is read and dropped).
        let (bigEnd, big) = try ChildProcess.capture("/bin/sh", arguments: ["-c", "head -c 300000 /dev/zero"], limit: 1000)
        #expect(bigEnd == .exited(0))
        #expect(big.count == 1000)
        #expect(throws: SystemError.self) { try ChildProcess.capture("/nonexistent/program", arguments: []) }
    }

    @Test func locateSearchesThePathLikeSpawnp() {
        #expect(ChildProcess.locate("sh", path: "/nonexistent:/bin") == "/bin/sh")
        #expect(ChildProcess.locate("sh", path: "relative:/nonexistent") == nil)
        #expect(ChildProcess.locate("no-such-program-here", path: "/bin:/usr/bin") == nil)
        #expect(ChildProcess.locate("/bin/sh", path: nil) == "/bin/sh")
    }
}

@Suite struct ErrnoTests {
    @Test func descriptionsAndRetries() throws {
        #expect(Errno.noSuchFileOrDirectory.description == "No such file or directory")
        #expect(SystemError("rename", "/a", errno: .fileExists).description == "cannot rename /a: File exists")
        #expect(SystemError("read", "/a", reason: "it is not a regular file").description == "cannot read /a: it is not a regular file")
        var calls = 0
        let r = try Errno.retryingOnInterrupt { () -> Int32 in
            calls += 1
            if calls < 3 { errno = EINTR; return -1 }
            return 5
        }
        #expect(r == 5 && calls == 3)
        #expect(throws: Errno.noSuchFileOrDirectory) { try Errno.retryingOnInterrupt { () -> Int32 in errno = ENOENT; return -1 } }
    }
}

@Suite struct ParallelMapTests {
    /// Every index runs exactly once, the results come back in index order, and up to `width`
    /// run at the same time (each waits until the others are in, so a serial run would never
    /// see more than one).
    @Test func everyIndexOnceInOrderSeveralAtOnce() {
        let running = Mutex<(now: Int, most: Int, seen: [Int])>((0, 0, []))
        let out = SystemThread.map(12, width: 4) { i -> Int in
            running.withLock { $0.now += 1; $0.most = max($0.most, $0.now); $0.seen.append(i) }
            for _ in 0..<200 where running.withLock({ $0.most }) < 4 { usleep(1000) }
            running.withLock { $0.now -= 1 }
            return i * i
        }
        #expect(out == (0..<12).map { $0 * $0 })
        let state = running.withLock { $0 }
        #expect(state.seen.sorted() == Array(0..<12))
        #expect(state.most == 4, "at most 4 and, given the chance, 4 at once")
        #expect(SystemThread.map(0, width: 4) { $0 } == [])
        #expect(SystemThread.map(3, width: 1) { $0 + 1 } == [1, 2, 3])
    }
}

@Suite struct ClocksTests {
    /// The wall clock's two forms agree; the monotonic and boot clocks never go back; the
    /// process's CPU time grows with work.
    @Test func readingsAgreeAndDoNotGoBack() {
        let ms = Clocks.wallMilliseconds()
        let s = Clocks.wallSeconds()
        #expect(abs(Double(ms) / 1000 - s) < 5)
        #expect(ms > 1_700_000_000_000, "after 2023")
        let m0 = Clocks.monotonicNanoseconds(), b0 = Clocks.bootNanoseconds(), i0 = Clocks.monotonicNow()
        let cpu0 = Clocks.processCPUNanoseconds()
        var x: UInt64 = 1
        for i in 0..<2_000_000 { x = x &* 6364136223846793005 &+ UInt64(i) }
        #expect(x != 0)
        #expect(Clocks.monotonicNanoseconds() >= m0)
        #expect(Clocks.bootNanoseconds() >= b0)
        #expect(Clocks.bootNanoseconds() >= Clocks.monotonicNanoseconds() / 2, "boot time counts at least what the monotonic clock does")
        #expect(Clocks.monotonicNow() >= i0)
        #expect(Clocks.processCPUNanoseconds() > cpu0)
        #expect(abs(Clocks.monotonicMilliseconds() - Int(Clocks.monotonicNanoseconds() / 1_000_000)) < 1000)
    }
}

@Suite struct DisplayTextTests {
    /// Controls, bidi overrides, zero-width and format characters, quotes and backslashes are
    /// shown as `\u{HEX}`; other text, accents included, as it is; the cut is in scalars.
    @Test func hiddenCharactersQuotesAndBackslashesAreShownAndTheTextIsCut() {
        #expect(DisplayText.escaped("caf\u{e9} ok") == "caf\u{e9} ok")
        #expect(DisplayText.escaped("a\u{1B}[31m\n\u{7F}") == "a\\u{1B}[31m\\u{A}\\u{7F}")
        #expect(DisplayText.escaped("root\u{202E}tsoh\u{200B}\u{FEFF}\u{85}\u{2028}") == "root\\u{202E}tsoh\\u{200B}\\u{FEFF}\\u{85}\\u{2028}")
        #expect(DisplayText.escaped("say \"hi\" \\n") == "say \\u{22}hi\\u{22} \\u{5C}n")
        #expect(DisplayText.escaped(String(repeating: "y", count: 70)) == String(repeating: "y", count: 64) + "…")
        #expect(DisplayText.escaped(String(repeating: "y", count: 64)) == String(repeating: "y", count: 64))
        #expect(DisplayText.escaped(String(repeating: "y", count: 70), limit: nil).count == 70)
        #expect(DisplayText.isHidden("\u{2066}") && !DisplayText.isHidden("é"))
    }
}
