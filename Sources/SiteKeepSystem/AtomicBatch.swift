#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

extension AtomicFile {
    /// The order in which ``Batch/commit(order:)`` puts a batch's files in place.
    public enum RenameOrder: Sendable {
        /// The order the files were added.
        case asAdded
        /// Last added first (a fetch adds what refers to others first, and must store it last).
        case reversed
        /// By the rank each target's path is given, lowest first (files of equal rank last
        /// added first): for a caller that learns only at the end what must be in place before
        /// what (a fetch: an object after everything it refers to, whatever order they came in).
        case ranked(@Sendable (String) -> Int)
    }

    /// Many durable replacements, written in the background while the caller goes on and put
    /// in place together: the way a fetch stores objects as they arrive.
    ///
    /// ``add(_:_:replaceExisting:)`` hands a file to up to `width` helper threads, which make its
    /// temporary file (`O_EXCL | O_NOFOLLOW`, the final mode), write every byte and `fsync` it,
    /// so the file system commits their journal entries together and the writing overlaps
    /// whatever the caller waits for (a server's next answer). Nothing is visible under its
    /// final name until ``commit(order:)``, which waits for every file to be durable, then renames
    /// each in the order asked and `fsync`s each folder once: a crash at any point leaves every
    /// target either as it was or whole. ``abandon()`` (or releasing the batch uncommitted)
    /// removes the temporary files and leaves every target as it was.
    ///
    /// `add` may be called from several threads at once; `commit` and `abandon` by one caller,
    /// after every `add` has returned.
    ///
    /// ```swift
    /// let batch = AtomicFile.Batch(temporaryFolder: vault + "/local/tmp")
    /// for (path, bytes) in arriving { batch.add(path, bytes) }
    /// try batch.commit(order: .reversed)
    /// ```
    public final class Batch: Sendable {
        /// What the helpers hold while they run. The caller's handle is this class alone, so
        /// releasing it uncommitted abandons the batch at once (its helpers stopped, its
        /// temporary files removed before the release returns) instead of when the last helper
        /// has lingered out.
        private let core: Core

        /// How long a helper with nothing to write waits for more before it ends. A fetch adds
        /// its files in bursts, one per answer of the server; a helper that ended between two
        /// bursts was started again for the next (a clone of 1,000 files started ~570 threads
        /// at width 8), each start a few system calls on a machine the server shares.
        static let lingerNs = 200_000_000

        /// - Parameters:
        ///   - mode: the files' mode (0600 by default), set exactly whatever the umask.
        ///   - temporaryFolder: where the temporary files are made (on the targets' file
        ///     system), instead of beside each target.
        ///   - width: helper threads at most (``AtomicFile/syncWidth`` by default).
        ///   - onHelperStarted: called each time a helper thread starts (how a test sees that
        ///     helpers wait between bursts instead of being started again); nil, the default,
        ///     in production.
        ///   - durable: true (the default): each file is fsynced before it is renamed and each
        ///     folder after, as above. False, for cache files that can be fetched again (a
        ///     fetch's objects): no `fsync` of any file or folder; ``commit(order:)`` renames, then
        ///     syncs the file system of the first target once (``FileIO/syncFileSystem(of:)``), so
        ///     every file is on disk when it returns, for a fraction of the cost. A crash before
        ///     that can leave a target missing, empty or torn; its reader must detect and refetch it.
        public init(mode: UInt32 = 0o600, temporaryFolder: String? = nil, width: Int = AtomicFile.syncWidth,
                    durable: Bool = true, onHelperStarted: (@Sendable () -> Void)? = nil) {
            core = Core(mode: mode, temporaryFolder: temporaryFolder, width: width, durable: durable, onHelperStarted: onHelperStarted)
        }

        deinit { core.abandon() }

        /// Queues `bytes` to replace `path`. With `replaceExisting` false, a file already at
        /// `path` when the batch commits is kept and this one dropped (content-addressed files:
        /// an object already stored is never replaced). A failure to write shows at ``commit(order:)``.
        public func add(_ path: String, _ bytes: [UInt8], replaceExisting: Bool = true) {
            core.add(path, bytes, replaceExisting: replaceExisting)
        }

        /// Waits for every file to be durable, then puts each in place in `order` and `fsync`s
        /// each folder once (a batch made with `durable` false: waits for every file to be
        /// written, renames, then syncs the file system once).
        ///
        /// - Throws: ``SystemError`` for the first file that could not be written (then nothing
        ///   was put in place) or renamed (then the files before it in `order` are in place,
        ///   the rest are not); every temporary file not put in place is removed.
        public func commit(order: RenameOrder = .asAdded) throws(SystemError) {
            try core.commit(order: order)
        }

        /// Stops the helpers (a file they are writing is finished, the rest is not started),
        /// waits for them, and removes every temporary file: no target changes. Nothing
        /// happens after a commit, or a second time.
        public func abandon() { core.abandon() }

        /// Renames `tmp` to `path` unless `path` exists; false when it did (`tmp` stays).
        /// `renameat2(RENAME_NOREPLACE)`, or a hard link where the file system lacks the flag.
        static func placeUnlessPresent(_ tmp: String, _ path: String) throws(SystemError) -> Bool {
            if sitekeep_rename_noreplace(tmp, path) == 0 { return true }
            switch Errno.current {
            case .fileExists: return false
            case .invalidArgument, .notImplemented:
                if link(tmp, path) == 0 { unlink(tmp); return true }
                if Errno.current == .fileExists { return false }
                throw .current("link \(tmp) to", path)
            default:
                throw .current("rename \(tmp) to", path)
            }
        }
    }

    /// A ``Batch``'s state and helpers.
    private final class Core: @unchecked Sendable {
        // @unchecked: every mutable field is behind `state` (a Mutex); `done` is a POSIX
        // semaphore (thread-safe by contract), allocated once and freed in deinit.
        private struct Job {
            let index: Int
            let path: String
            let bytes: [UInt8]
        }
        private struct Entry {
            let path: String
            let replaceExisting: Bool
            var temporary: String?
        }
        private struct State {
            var queue: [Job?] = []
            var next = 0
            var entries: [Entry] = []
            var failure: SystemError?
            var running = 0
            /// Helpers waiting on `wake` for the next file (counted in `running`).
            var idle = 0
            var started = 0
            var waited = 0
            var finished = false
            /// Set by commit: helpers write what is queued, then stop instead of waiting.
            var committing = false
        }
        private let state = Mutex(State())
        private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        /// Posted once per idle helper claimed by ``add(_:_:replaceExisting:)`` or released by
        /// ``commit(order:)`` and ``abandon()``.
        private let wake = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        private let mode: UInt32
        private let temporaryFolder: String?
        private let width: Int
        /// Whether each file and folder is fsynced (false: one file-system sync at commit).
        private let durable: Bool
        /// Called for each helper thread started; none in production.
        private let onHelperStarted: (@Sendable () -> Void)?

        init(mode: UInt32, temporaryFolder: String?, width: Int, durable: Bool, onHelperStarted: (@Sendable () -> Void)?) {
            self.durable = durable
            self.mode = mode
            self.temporaryFolder = temporaryFolder
            self.width = max(1, width)
            self.onHelperStarted = onHelperStarted
            sem_init(done, 0, 0)
            sem_init(wake, 0, 0)
        }

        deinit {
            // Helpers hold the core while they run, so none runs now (the handle's release
            // abandoned it already; this is for a core whose handle never existed).
            let leftover = state.withLock { s -> [Entry] in s.finished ? [] : s.entries }
            for e in leftover { if let t = e.temporary { unlink(t) } }
            sem_destroy(done)
            done.deallocate()
            sem_destroy(wake)
            wake.deallocate()
        }

        func add(_ path: String, _ bytes: [UInt8], replaceExisting: Bool) {
            enum Helper { case none, wake, spawn }
            let helper = state.withLock { s -> Helper in
                s.entries.append(Entry(path: path, replaceExisting: replaceExisting, temporary: nil))
                s.queue.append(Job(index: s.entries.count - 1, path: path, bytes: bytes))
                if s.idle > 0 {
                    s.idle -= 1
                    return .wake
                }
                guard s.running < width else { return .none }
                s.running += 1
                s.started += 1
                return .spawn
            }
            if helper == .wake { sem_post(wake) }
            guard helper == .spawn else { return }
            if SystemThread.detach({ self.work(); sem_post(self.done) }) {
                onHelperStarted?()
            } else {
                // No thread to be had: do the work here (and never wait for more).
                state.withLock { $0.started -= 1 }
                work(inline: true)
            }
        }

        /// What a helper does next.
        private enum Step { case write(Job), wait, stop }

        /// Writes queued files; with none left, waits up to ``Batch/lingerNs`` for more; stops when
        /// that wait runs out, a file failed, or the batch is committed or abandoned.
        private func work(inline: Bool = false) {
            while true {
                let step = state.withLock { s -> Step in
                    guard s.failure == nil, !s.finished else {
                        s.running -= 1
                        return .stop
                    }
                    guard s.next < s.queue.count else {
                        if s.committing || inline {
                            s.running -= 1
                            return .stop
                        }
                        s.idle += 1
                        return .wait
                    }
                    defer { s.queue[s.next] = nil; s.next += 1 }
                    return .write(s.queue[s.next]!)
                }
                let job: Job
                switch step {
                case .stop: return
                case .wait:
                    if !waitForWork() { return }
                    continue
                case .write(let j): job = j
                }
                do {
                    let tmp = try AtomicFile.writeTemporary(job.bytes, for: job.path, mode: mode, temporaryFolder: temporaryFolder, sync: durable)
                    state.withLock { $0.entries[job.index].temporary = tmp }
                } catch {
                    state.withLock { if $0.failure == nil { $0.failure = error } }
                }
            }
        }

        /// An idle helper's wait: true when it was woken (for a file, or to see the batch end),
        /// false when it timed out and has stopped (no longer counted in `running`).
        private func waitForWork() -> Bool {
            var deadline = AtomicFile.realtimeDeadline(afterNs: Batch.lingerNs)
            while true {
                if sem_timedwait(wake, &deadline) == 0 { return true }
                if errno == EINTR { continue }
                // Timed out. A helper still counted idle stops; when none is, every idle helper
                // was claimed by a post meanwhile, one of which is this helper's: take it.
                let stop = state.withLock { s -> Bool in
                    guard s.idle > 0 else { return false }
                    s.idle -= 1
                    s.running -= 1
                    return true
                }
                if stop { return false }
                while sem_wait(wake) != 0 && errno == EINTR {}
                return true
            }
        }

        /// Tells the helpers to stop: at once (`abandon`), or once the queue is written
        /// (`commit`); idle ones are woken to see it.
        /// False, and nothing done, when the batch had already ended.
        @discardableResult
        private func release(abandoning: Bool) -> Bool {
            let idle = state.withLock { s -> Int? in
                guard !s.finished else { return nil }
                if abandoning { s.finished = true } else { s.committing = true }
                defer { s.idle = 0 }
                return s.idle
            }
            guard let idle else { return false }
            for _ in 0..<idle { sem_post(wake) }
            return true
        }

        /// Waits until every helper started so far has stopped.
        private func waitForHelpers() {
            while true {
                let pending = state.withLock { $0.started - $0.waited }
                guard pending > 0 else { return }
                if sem_wait(done) == 0 { state.withLock { $0.waited += 1 } } else if errno != EINTR { return }
            }
        }

        func commit(order: RenameOrder) throws(SystemError) {
            guard release(abandoning: false) else {
                throw SystemError("commit", temporaryFolder ?? "a batch", reason: "the batch was already committed or abandoned; make a new one")
            }
            waitForHelpers()
            let (entries, failure) = state.withLock { s -> ([Entry], SystemError?) in
                s.finished = true
                return (s.entries, s.failure)
            }
            var placed = Set<Int>()
            defer { for (i, e) in entries.enumerated() where !placed.contains(i) { if let t = e.temporary { unlink(t) } } }
            if let failure { throw failure }
            // Every file written and fsynced, or nothing is put in place.
            if let unwritten = entries.first(where: { $0.temporary == nil }) {
                throw SystemError("write", unwritten.path, reason: "the batch ended before this file was written")
            }
            var folders: [String] = []
            var seenFolders = Set<String>()
            let indices: [Int]
            switch order {
            case .asAdded: indices = Array(entries.indices)
            case .reversed: indices = entries.indices.reversed()
            case .ranked(let rank):
                let ranks = entries.map { rank($0.path) }
                indices = entries.indices.sorted { ranks[$0] != ranks[$1] ? ranks[$0] < ranks[$1] : $0 > $1 }
            }
            for i in indices {
                let e = entries[i]
                guard let tmp = e.temporary else { continue }
                if e.replaceExisting {
                    guard rename(tmp, e.path) == 0 else { throw .current("rename \(tmp) to", e.path) }
                } else if !(try Batch.placeUnlessPresent(tmp, e.path)) {
                    unlink(tmp)
                }
                placed.insert(i)
                let dir = AtomicFile.folder(of: e.path)
                if seenFolders.insert(dir).inserted { folders.append(dir) }
            }
            if durable {
                for dir in folders { try FileIO.syncFolder(dir) }
            } else if let first = entries.first {
                try FileIO.syncFileSystem(of: AtomicFile.folder(of: first.path))
            }
        }

        /// ``Batch/abandon()``: nothing when the batch already ended (committed or abandoned),
        /// whose temporary files are gone or placed.
        func abandon() {
            guard release(abandoning: true) else { return }
            waitForHelpers()
            let entries = state.withLock { $0.entries }
            for e in entries { if let t = e.temporary { unlink(t) } }
        }
    }
}
