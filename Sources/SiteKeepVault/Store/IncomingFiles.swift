import SiteKeepSystem
import Synchronization

/// Files a fetch brings from a remote, written under `.sg_vault/local/tmp` in the background
/// as they arrive (an ``AtomicFile/Batch``) and stored under their ids only by ``commit(ranks:)``,
/// once the fetch has checked every id, decryption and signature: until then nothing is
/// visible, and a fetch that fails leaves the folder as it was (``abandon()``).
///
/// A fetched object is a cache of the remote, not data this machine owns (issue 50): no file
/// is fsynced on its own. ``commit(ranks:)`` renames them all, then syncs the file system once,
/// so they are on disk before the caller moves a ref to them. A power loss before that can
/// leave some missing, empty or torn; a read finds that by the id check and fetches the object
/// again (``Vault/readObject(_:limit:)``, `vault fsck --repair`). Objects this machine writes
/// itself (commits, merges) do not come through here and stay durable one by one.
///
/// ``commit(ranks:)`` stores the files by the rank the fetch gives each (blobs, then trees from
/// the deepest up, then commits from the oldest), so every object is stored after everything
/// it refers to, whatever order they arrived in, and a process killed during the renames
/// leaves only objects whose closure is present. An object already stored is never replaced (a
/// truncated-hash collision cannot overwrite it); refs, indexes and key files are.
final class IncomingFiles: Sendable {
    let folder: String
    private let batch: AtomicFile.Batch
    private let madeFolders = Mutex<Set<String>>([])

    /// Helper threads writing at once. With an fsync per file, 32 overlapped the journal
    /// commits (a clone of 1,000 files waited 1–25 ms for the last fsyncs instead of 150–280 ms
    /// at 8). Without one, a write is a copy into the page cache: a few threads keep up with
    /// the server, and fewer threads cost the 2-core machine less.
    static let width = 4

    /// Files for the vault folder of `store`.
    init(into store: LocalObjectStore) throws(VaultError) {
        folder = store.folder
        try FileAccess.makeFolders(store.tempFolder)
        // What an earlier fetch killed midway left there goes first.
        store.sweepTemporaryFiles()
        batch = AtomicFile.Batch(temporaryFolder: store.tempFolder, width: Self.width, durable: false)
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

    /// Stores every file added, lowest rank first (`ranks` by file id; a file it does not name
    /// has rank 0; files of equal rank last added first), then syncs the file system once:
    /// every file is on disk when this returns.
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
