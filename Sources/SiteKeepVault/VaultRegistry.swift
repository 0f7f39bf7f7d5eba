import SiteKeepJSON
#if canImport(Glibc)
import Glibc
#endif

/// One registered vault: a name, the folder, and public facts about it (no key).
public struct VaultRecord: Sendable, Equatable {
    /// The name the user gave at `vault add`.
    public let name: String
    /// The working-copy folder.
    public let path: String
    /// The vault id (public).
    public let vaultID: String
    /// Whether only a read key was given.
    public let readOnly: Bool
    /// The origin of the site the vault belongs to, when one was named (`vault clone --site`).
    public var site: String?

    public init(name: String, path: String, vaultID: String, readOnly: Bool, site: String? = nil) {
        self.name = name
        self.path = path
        self.vaultID = vaultID
        self.readOnly = readOnly
        self.site = site
    }

    /// `^[A-Za-z0-9_.-]{1,64}$`, not starting with '.'.
    public static func isValidName(_ name: String) -> Bool {
        let u = name.utf8
        return (1...64).contains(u.count) && u.first != UInt8(ascii: ".") && u.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x5f || $0 == 0x2d || $0 == 0x2e
        }
    }
}

/// The list of registered vaults, one JSON file (mode 0600, replaced atomically).
/// It holds names, folders and vault ids; keys live in a ``VaultKeyStore``.
public struct VaultRegistry: Sendable {
    /// The registry file.
    public let file: String

    public init(file: String) { self.file = file }

    /// Every record, in the order added.
    public func records() throws(VaultError) -> [VaultRecord] {
        let bytes: [UInt8]
        switch try FileAccess.read(file, limit: 4 << 20, object: file) {
        case .missing: return []
        case .bytes(let b): bytes = b
        }
        let f = try Fields(parsing: bytes, object: file)
        var out: [VaultRecord] = []
        for (i, v) in try f.array("vaults").enumerated() {
            let r = try Fields(v, object: "\(file) vault \(i)")
            out.append(VaultRecord(name: try r.string("name"), path: try r.string("path"), vaultID: try r.string("vault_id"),
                                   readOnly: try r.bool("read_only", default: false), site: try r.optionalString("site")))
        }
        return out
    }

    /// The record named `name`.
    public func record(named name: String) throws(VaultError) -> VaultRecord {
        guard let r = try records().first(where: { $0.name == name }) else { throw .unknownVault(name: name) }
        return r
    }

    func write(_ records: [VaultRecord]) throws(VaultError) {
        let doc = JSONValue.object([JSONMember(key: "vaults", value: .array(records.map { r in
            .object([JSONMember(key: "name", value: .string(r.name)), JSONMember(key: "path", value: .string(r.path)),
                     JSONMember(key: "vault_id", value: .string(r.vaultID)), JSONMember(key: "read_only", value: .bool(r.readOnly))]
                    + (r.site.map { [JSONMember(key: "site", value: .string($0))] } ?? []))
        }))])
        try FileAccess.writeAtomically(JSONSerializer.bytes(doc, style: .pretty) + [0x0a], to: file)
    }

    /// Adds a record; refuses a name in use.
    public func add(_ record: VaultRecord) throws(VaultError) {
        guard VaultRecord.isValidName(record.name) else { throw .invalidVaultName(record.name) }
        var all = try records()
        if all.contains(where: { $0.name == record.name }) { throw .vaultExists(name: record.name) }
        all.append(record)
        try write(all)
    }

    /// Names the site a vault belongs to.
    public func setSite(_ site: String, forVault name: String) throws(VaultError) {
        var all = try records()
        guard let i = all.firstIndex(where: { $0.name == name }) else { throw .unknownVault(name: name) }
        all[i].site = site
        try write(all)
    }

    /// Removes a record; throws ``VaultError/unknownVault(name:)`` if absent.
    public func remove(named name: String) throws(VaultError) {
        var all = try records()
        guard all.contains(where: { $0.name == name }) else { throw .unknownVault(name: name) }
        all.removeAll { $0.name == name }
        try write(all)
    }
}

extension FileAccess {
    /// Writes `bytes` to a temp file (0600) beside `path`, fsyncs and renames it over `path`.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(VaultError) {
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(path: path, reason: String(cString: strerror(errno))) }
        var done = 0
        while done < bytes.count {
            // bytes is non-empty inside the loop, so it has a base address.
            let n = bytes.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress! + done, bytes.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                close(fd); unlink(tmp)
                throw .io(path: path, reason: reason)
            }
            done += n
        }
        guard fsync(fd) == 0, close(fd) == 0, rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw .io(path: path, reason: reason)
        }
    }
}
