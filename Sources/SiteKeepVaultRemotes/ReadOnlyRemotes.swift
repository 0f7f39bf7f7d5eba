public import SiteKeepVault
import SiteKeepHTTP
import SiteKeepJSON
import SiteKeepSystem

/// Another vault's `.sg_vault` folder (or a server store's per-vault folder) on any shared file
/// system, read-only as in sgit (SGIT-FORMAT.md §7.2): a file id is looked up at
/// `<folder>/api/vault/read/<vault id>/<file id>`, then at `<folder>/<file id>`, then (a vault's
/// working folder given) at `<folder>/.sg_vault/<file id>`.
public struct FolderRemote: VaultObjectStore {
    public let folder: String
    public let vaultID: String

    public init(folder: String, vaultID: String) {
        var f = folder
        if f.hasPrefix("file://") { f.removeFirst("file://".count) }
        while f.count > 1, f.hasSuffix("/") { f.removeLast() }
        self.folder = f
        self.vaultID = vaultID
    }

    public var label: String { "the folder \(folder)" }
    public var isWritable: Bool { false }

    public func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for id in fileIDs {
            guard let valid = FileIDs.validate(id) else { throw .invalidID(kind: "file id", value: id, in: label) }
            for candidate in ["\(folder)/api/vault/read/\(vaultID)/\(valid)", "\(folder)/\(valid)", "\(folder)/.sg_vault/\(valid)"] {
                if let b = try LocalFiles.read(candidate, object: valid) { out[valid] = b; break }
            }
        }
        return out
    }

    public func list(prefix: String) throws(VaultError) -> [String] {
        for base in ["\(folder)/api/vault/read/\(vaultID)", folder, folder + "/.sg_vault"] {
            let ids = LocalFiles.walk(base).filter { $0.hasPrefix(prefix) }.compactMap(FileIDs.validate)
            if !ids.isEmpty { return ids.sorted() }
        }
        return []
    }

    public func write(_ files: [StoredFile]) throws(VaultError) {
        throw .readOnly(reason: "\(label) is a read-only remote (as in sgit); push to the vault server")
    }

    public func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool {
        throw .readOnly(reason: "\(label) is a read-only remote (as in sgit); push to the vault server")
    }
}

/// A vault published on a plain web server or object storage, read-only: `GET {base}/{file id}`
/// (404 = absent); listing needs `{base}/manifest.json` (`{"objects": [{"file_id"}, …]}`).
public struct StaticHTTPRemote: VaultObjectStore {
    public let baseURL: String

    public init(baseURL: String) throws(VaultError) {
        var u = baseURL
        if u.hasPrefix("static+") { u.removeFirst("static+".count) }
        while u.hasSuffix("/") { u.removeLast() }
        guard HTTPClient.isAllowedURL(u) else {
            throw .invalidRemote("\(baseURL): a static remote must be https (plain http only to loopback)")
        }
        self.baseURL = u
    }

    public var label: String { baseURL }
    public var isWritable: Bool { false }

    public func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for id in fileIDs {
            guard let valid = FileIDs.validate(id) else { throw .invalidID(kind: "file id", value: id, in: label) }
            let r: HTTPResponse
            do { r = try HTTPClient.send(HTTPRequest(method: "GET", url: baseURL + "/" + valid, maxResponseBytes: 128 << 20)) } catch {
                throw .remote(remote: label, reason: "\(valid): \(error.isTransient ? "no answer" : "refused") (\(error.description))", transient: error.isTransient, retryAfterMs: nil)
            }
            switch r.status {
            case 200: out[valid] = r.body
            case 404, 403: continue
            case 429, 500...599: throw .remote(remote: label, reason: "status \(r.status)", transient: true, retryAfterMs: SGSendRemote.retryAfterMs(r.header("retry-after")))
            default: throw .remote(remote: label, reason: "unexpected status \(r.status)", transient: false, retryAfterMs: nil)
            }
        }
        return out
    }

    public func list(prefix: String) throws(VaultError) -> [String] {
        let r: HTTPResponse
        do { r = try HTTPClient.send(HTTPRequest(method: "GET", url: baseURL + "/manifest.json", maxResponseBytes: 16 << 20)) } catch {
            throw .remote(remote: label, reason: "manifest.json: \(error.isTransient ? "no answer" : "refused") (\(error.description))", transient: error.isTransient, retryAfterMs: nil)
        }
        guard r.status == 200, let doc = try? JSONParser.parse(r.body, limits: .document) else { return [] }
        return (doc["objects"]?.arrayValue ?? []).compactMap { $0["file_id"]?.stringValue.flatMap(FileIDs.validate) }.filter { $0.hasPrefix(prefix) }
    }

    public func write(_ files: [StoredFile]) throws(VaultError) {
        throw .readOnly(reason: "\(label) is a static, read-only remote; push to the vault server")
    }

    public func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool {
        throw .readOnly(reason: "\(label) is a static, read-only remote; push to the vault server")
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Bounded reads and walks of plain files (no symlinks followed at the last component).
enum LocalFiles {
    /// The file at `path` when it is a regular file (no link at the last component; a FIFO or
    /// a device in a remote's folder is refused without blocking) of at most `limit` bytes; nil
    /// when there is none.
    static func read(_ path: String, object: String, limit: Int = 1 << 30) throws(VaultError) -> [UInt8]? {
        let opened: (fd: Int32, size: Int)?
        do { opened = try FileIO.openRegularFile(path) } catch { throw .io(path: object, reason: error.cause) }
        guard let (fd, size) = opened else { return nil }
        defer { close(fd) }
        guard size <= limit else { throw .tooLarge(object: object, size: size, limit: limit) }
        do { return try FileIO.readWhole(fd, size: size, path: object) } catch { throw .io(path: object, reason: error.cause) }
    }

    /// Relative paths of the files under `base` (`bare/...`).
    static func walk(_ base: String) -> [String] {
        var out: [String] = []
        func go(_ rel: String, depth: Int) {
            guard depth < 6, let dir = opendir(base + (rel.isEmpty ? "" : "/" + rel)) else { return }
            defer { closedir(dir) }
            while let ent = readdir(dir) {
                let name = withUnsafeBytes(of: ent.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name == "." || name == ".." { continue }
                let path = rel.isEmpty ? name : rel + "/" + name
                if ent.pointee.d_type == UInt8(DT_DIR) { go(path, depth: depth + 1) } else if ent.pointee.d_type == UInt8(DT_REG) { out.append(path) }
            }
        }
        go("", depth: 0)
        return out
    }
}
