#if canImport(Glibc)
import Glibc
#endif
import SiteKeepSystem

extension Vault {
    /// Brings the plaintext working copy of a folder sgit checked out in step with a commit
    /// SiteKeep made (§5.5 step 6), so `sgit status` stays clean: a file is replaced or removed
    /// only when it still holds what the previous HEAD recorded (or is absent); a file with local
    /// edits is left alone and reported. Never follows a symlink, never writes outside the folder.
    func updateWorkingCopy(before: [VaultPath: FlatFile], changes: [(VaultPath, VaultChange)], newTree: ObjectID) -> [String] {
        var skipped: [String] = []
        for (path, change) in changes {
            guard let parentOK = try? prepareParents(of: path), parentOK else { skipped.append(path.string); continue }
            let file = root + "/" + path.string
            let current: [UInt8]?
            switch try? FileAccess.read(file, limit: options.limits.maxBlobBytes, object: path.string) {
            case .bytes(let b)?: current = b
            case .missing?: current = nil
            case nil: skipped.append(path.string); continue
            }
            let old = before[path]
            let untouched: Bool
            if let current {
                untouched = old.map { ObjectIDs.contentHash(current) == $0.contentHash && current.count == $0.size } ?? false
            } else {
                untouched = true
            }
            guard untouched else { skipped.append(path.string); continue }
            switch change {
            case .remove:
                if current != nil { try? FileAccess.remove(file) }
            case .write(let bytes):
                if (try? FileAccess.writeDurably(bytes, to: file, mode: 0o644, syncFolder: false, tempFolder: tempFolder)) == nil { skipped.append(path.string) }
            case .entry(let flat):
                guard let bytes = try? blob(flat.blobID, size: flat.size, contentHash: flat.contentHash, path: path),
                      (try? FileAccess.writeDurably(bytes, to: file, mode: 0o644, syncFolder: false, tempFolder: tempFolder)) != nil else {
                    skipped.append(path.string); continue
                }
            }
        }
        return skipped
    }

    /// Creates the folders above `path` inside the working copy; false when one of them is a
    /// symlink or not a folder.
    func prepareParents(of path: VaultPath) throws(VaultError) -> Bool {
        var dir = root
        for seg in path.segments.dropLast() {
            dir += "/" + String(decoding: seg, as: UTF8.self)
            var st = stat()
            if lstat(dir, &st) == 0 {
                guard (st.st_mode & S_IFMT) == S_IFDIR else { return false }
            } else {
                guard (try? PrivateFolder.make(dir)) == true else { return false }
            }
        }
        return true
    }
}
