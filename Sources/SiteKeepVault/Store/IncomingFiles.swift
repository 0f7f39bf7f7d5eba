import SiteKeepSystem
import Synchronization

/// Files a fetch brings from a remote, made durable under `.sg_vault/local/tmp` in the background
/// as they arrive (an ``AtomicFile/Batch``) and stored under their ids only by ``commit()``, once
/// the fetch has checked every id, decryption and signature: until then nothing is visible, and
/// a fetch that fails leaves the folder as it was (``abandon()``).
///
/// ``commit(ranks:)`` stores the files by the rank the fetch gives each (blobs, then trees from
/// the deepest up, then commits from the oldest), so every object is stored after everything
/// it refers to, whatever order they arrived in, and a crash during the renames leaves only
/// objects whose closure is present. An object already stored is never replaced (a
/// truncated-hash collision cannot overwrite it); refs, indexes and key files are.
final class IncomingFiles: Sendable {
    let folder: String
    private let batch: AtomicFile.Batch
    private let madeFolders = Mutex<Set<String>>([])

    /// Helper threads writing and fsyncing at once. A fetch's files are many and small, and
    /// the file system commits the journal entries of concurrent fsyncs together: on this VM's
    /// ext4, 1,024 files of 400 bytes took 200–250 ms eight at once, 90–110 ms 128 at once; in
    /// a clone of 1,000 files through the vault server the wait for the last fsyncs after the
    /// last blob arrived fell from 150–280 ms (8 at once) to 1–25 ms (32).
    static let width = 32

    /// Files for the vault folder of `store`.
    init(into store: LocalObjectStore) throws(VaultError) {
        folder = store.folder
        try FileAccess.makeFolders(store.tempFolder)
        // What an earlier fetch killed midway left there goes first.
        store.sweepTemporaryFiles()
        batch = AtomicFile.Batch(temporaryFolder: store.tempFolder, width: Self.width)
    }

    /// Queues one file (safe from several threads at once).
    func add(_ fileID: String, _ bytes: [UInt8]) throws(VaultError) {
        guard let id = FileIDs.validate(fileID) else { throw .invalidID(kind: "file id", value: fileID, in: "the vault folder \(folder)") }
        let path = folder + "/" + id
        let parent = AtomicFile.folder(of: path)
        if !madeFolders.withLock({ $0.contains(parent) }) {
            try FileAccess.makeFolders(parent)
            madeFolders.withLock { _ = $0.insert(parent) }
        }
        batch.add(path, bytes, replaceExisting: FileIDs.objectID(of: id) == nil)
    }

    /// Stores every file added, durably, lowest rank first (`ranks` by file id; a file it does
    /// not name has rank 0); files of equal rank last added first.
    func commit(ranks: [String: Int]) throws(VaultError) {
        let prefix = folder + "/"
        let rank: @Sendable (String) -> Int = { path in
            path.hasPrefix(prefix) ? ranks[String(path.dropFirst(prefix.count))] ?? 0 : 0
        }
        do { try batch.commit(order: .ranked(rank)) } catch { throw .io(path: error.path, reason: error.cause) }
    }

    /// Drops every file added: nothing is stored.
    func abandon() { batch.abandon() }
}
