#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepCrypto
import SiteKeepJSON
public import SiteKeepSystem
import Synchronization

/// The embedded keyring: one file in the store's home, used when no Secret Service is reachable
/// or when chosen with `--keyring file`.
///
/// The file holds only what the protocol hands it, wrapped blobs that are already ciphertext; its
/// own protection at rest is the file permissions. The folder must be `0700` and the file `0600`,
/// both owned by the current user; looser permissions are refused rather than repaired, with the
/// `chmod` that fixes them.
///
/// Every change is a read-modify-write of the whole file under a `Mutex` (threads) and an
/// exclusive `flock` on `keyring.v1.lock` (processes), written atomically: a temporary file in
/// the same folder, `fsync`, `rename` over the old file, `fsync` of the folder. Readers never
/// take the lock: they see the old file or the new one, never a mixture.
///
/// ## File format (version 1)
/// ```
/// sitekeep-keyring 1\n
/// length <decimal byte count of the body>\n
/// sha256 <lowercase hex SHA-256 of the body>\n
/// \n
/// <body: JSON {"items":[{"store","kind","id","label","blob": base64}]}>
/// ```
/// A file whose length or digest does not match is reported as ``KeyringError/corrupt(_:)``,
/// never half-read.
public final class FileKeyring: KeyringBackend {
    /// The file name inside the home folder.
    public static let fileName = "keyring.v1"
    /// Files larger than this are refused as corrupt (a keyring holds a few dozen small blobs).
    public static let maximumFileSize = 64 << 20

    /// The folder holding the keyring.
    public let folder: String
    /// The keyring file's path.
    public let path: String
    private let lockPath: String
    private let writers = Mutex(())
    /// The last file content decoded, and its items (see ``readItems()``).
    private let lastRead = Mutex<(bytes: [UInt8], items: [KeyringItemID: Record])?>(nil)

    public var kind: KeyringKind { .file }
    public var location: String { "file \(path)" }

    /// Opens (creating the folder, `0700`, when missing) the file keyring in `folder`.
    /// The file itself is created by the first ``store(_:for:label:)``.
    /// - Throws: ``KeyringError/insecurePermissions(_:)`` for a folder or file readable by
    ///   others; ``KeyringError/io(_:)`` when the folder cannot be created.
    public init(folder: String) throws(KeyringError) {
        var folder = folder
        while folder.count > 1, folder.hasSuffix("/") { folder.removeLast() }
        self.folder = folder
        self.path = folder + "/" + Self.fileName
        self.lockPath = path + ".lock"
        try Self.ensureFolder(folder)
        _ = try readItems()
    }

    /// Opens the file keyring in a store's home.
    public convenience init(home: StoreHome) throws(KeyringError) {
        try self.init(folder: home.path)
    }

    // MARK: KeyringBackend

    public func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) {
        try modify { items in
            items[item] = Record(label: label, blob: blob)
            return ()
        }
    }

    public func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        guard let record = try readItems()[item] else { throw .itemMissing(item) }
        return record.blob
    }

    @discardableResult
    public func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool {
        try modify { items in items.removeValue(forKey: item) != nil }
    }

    public func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        try readItems().keys
            .filter { $0.store == store && (kind == nil || $0.kind == kind) }
            .sorted { ($0.kind, $0.id) < ($1.kind, $1.id) }
    }

    // MARK: Records and the file format

    struct Record: Equatable {
        var label: String
        var blob: [UInt8]
    }

    /// Limits for the body: the whole file size, and a shallow, regular shape.
    static let bodyLimits = JSONLimits(maxBytes: maximumFileSize, maxDepth: 4, maxStringBytes: maximumFileSize, maxElements: 1_000_000)

    static let magic = "sitekeep-keyring"
    static let version = 1

    static func encode(_ items: [KeyringItemID: Record]) throws(KeyringError) -> [UInt8] {
        // Members in sorted key order, items sorted by (store, kind, id): one content, one file.
        let entries: [JSONValue] = items
            .sorted { ($0.key.store, $0.key.kind, $0.key.id) < ($1.key.store, $1.key.kind, $1.key.id) }
            .map { .object(["blob": .string(Base64.encode($0.value.blob)), "id": .string($0.key.id), "kind": .string($0.key.kind),
                            "label": .string($0.value.label), "store": .string($0.key.store)]) }
        let body = JSONSerializer.bytes(.object(["items": .array(entries)]))
        let header = "\(magic) \(version)\nlength \(body.count)\nsha256 \(Hex.encode(SHA256.hash(body)))\n\n"
        return Array(header.utf8) + body
    }

    static func decode(_ bytes: [UInt8]) throws(KeyringError) -> [KeyringItemID: Record] {
        // Four header lines; the fourth is empty.
        var lines: [String] = []
        var start = 0
        var index = 0
        while lines.count < 4 {
            guard index < bytes.count, index - start <= 128 else {
                throw .corrupt("no SiteKeep keyring header (truncated or not a keyring file)")
            }
            if bytes[index] == UInt8(ascii: "\n") {
                lines.append(String(decoding: bytes[start..<index], as: UTF8.self))
                start = index + 1
            }
            index += 1
        }
        let first = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard first.count == 2, first[0] == magic else {
            throw .corrupt("not a SiteKeep keyring file")
        }
        guard first[1] == String(version) else {
            throw .corrupt("keyring format version '\(first[1])' is not supported by this SiteKeep (it reads version \(version)); use a newer SiteKeep")
        }
        guard lines[1].hasPrefix("length "), let length = Int(lines[1].dropFirst("length ".count)), length >= 0,
              lines[2].hasPrefix("sha256 "), lines[3].isEmpty else {
            throw .corrupt("malformed keyring header")
        }
        let body = Array(bytes[start...])
        guard body.count == length else {
            throw .corrupt("the body is \(body.count) bytes, the header says \(length) (truncated or extended)")
        }
        let recorded = String(lines[2].dropFirst("sha256 ".count))
        guard Hex.encode(SHA256.hash(body)) == recorded else {
            throw .corrupt("the SHA-256 of the content does not match its header (the file was changed)")
        }
        let entries: [JSONValue]
        do {
            // Unknown members are ignored, as they always were; the digest above already proved
            // the body is what a SiteKeep wrote.
            guard let list = try JSONParser.parse(body, limits: bodyLimits)["items"]?.arrayValue else {
                throw KeyringError.corrupt("")
            }
            entries = list
        } catch {
            throw .corrupt("the keyring content is not valid JSON of version \(version)")
        }
        var items: [KeyringItemID: Record] = [:]
        for entry in entries {
            guard let store = entry["store"]?.stringValue, let kind = entry["kind"]?.stringValue,
                  let itemID = entry["id"]?.stringValue, let label = entry["label"]?.stringValue,
                  let encoded = entry["blob"]?.stringValue else {
                throw .corrupt("the keyring content is not valid JSON of version \(version) (an item lacks a field)")
            }
            let id = KeyringItemID(store: store, kind: kind, id: itemID)
            let blob: [UInt8]
            do {
                blob = try Base64.decode(encoded)
            } catch {
                throw .corrupt("item \(id) has a blob that is not base64")
            }
            guard items.updateValue(Record(label: label, blob: blob), forKey: id) == nil else {
                throw .corrupt("item \(id) appears twice")
            }
        }
        return items
    }

    // MARK: Reading and writing

    /// The file's items, after the folder and file checks. The file is read every time; when its
    /// bytes equal the last bytes decoded, their items are returned without decoding them again
    /// (one unlock looks up several items, and decoding is most of a lookup's cost).
    func readItems() throws(KeyringError) -> [KeyringItemID: Record] {
        try Self.checkFolder(folder)
        // O_NONBLOCK: a FIFO or a device in its place is refused below instead of blocking open.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return [:] }
            if code == ELOOP { throw .insecurePermissions("\(path) is a symbolic link; replace it with the file it points to") }
            throw .io("cannot open \(path): \(Self.describe(code))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io("cannot stat \(path): \(Self.describe(errno))") }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .insecurePermissions("\(path) is not a regular file; remove it")
        }
        guard info.st_uid == geteuid() else {
            throw .insecurePermissions("\(path) belongs to uid \(info.st_uid), not to you (uid \(geteuid())); fix with: chown \(geteuid()) '\(path)'")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions("\(path) is accessible to group or others (mode \(Self.octal(info.st_mode))); fix with: chmod 600 '\(path)'")
        }
        guard Int(info.st_size) <= Self.maximumFileSize else {
            throw .corrupt("\(path) is \(info.st_size) bytes, more than a keyring can be")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(info.st_size))
        // Sized from fstat (a byte more shows a file that grew meanwhile): no 64 KiB scratch
        // buffer to zero on every lookup of a small keyring.
        var chunk = [UInt8](repeating: 0, count: min(64 << 10, Int(info.st_size) + 1))
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io("cannot read \(path): \(Self.describe(errno))")
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= Self.maximumFileSize else {
                throw .corrupt("\(path) is larger than a keyring can be")
            }
        }
        if let cached = lastRead.withLock({ $0 }), cached.bytes == bytes { return cached.items }
        let items = try Self.decode(bytes)
        lastRead.withLock { $0 = (bytes, items) }
        return items
    }

    /// Read-modify-write under the thread mutex and the cross-process lock.
    private func modify<T>(_ change: (inout [KeyringItemID: Record]) -> T) throws(KeyringError) -> T {
        let result: Result<T, KeyringError> = writers.withLock { _ in
            do throws(KeyringError) {
                let lock = try acquireFileLock()
                defer { withExtendedLifetime(lock) {} }  // dropping it releases the flock
                var items = try readItems()
                let value = change(&items)
                try writeAtomically(Self.encode(items))
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The cross-process lock on `keyring.v1.lock` (SiteKeepSystem's ``FileLock/Held``).
    private func acquireFileLock() throws(KeyringError) -> FileLock.Held {
        do { return try FileLock.Held(lockPath) } catch { throw .io("\(error)") }
    }

    /// Replaces the keyring file with `bytes` (0600): ``AtomicFile/replace(_:with:mode:)``.
    private func writeAtomically(_ bytes: [UInt8]) throws(KeyringError) {
        do { try AtomicFile.replace(path, with: bytes, mode: 0o600) } catch { throw .io("\(error)") }
    }

    // MARK: Folder checks

    /// Creates `folder` (and missing parents) with mode `0700`, then checks it.
    static func ensureFolder(_ folder: String) throws(KeyringError) {
        guard folder.hasPrefix("/") else { throw .io("the keyring folder must be an absolute path, not '\(folder)'") }
        var prefix = ""
        for component in folder.split(separator: "/") {
            prefix += "/" + component
            do { try PrivateFolder.make(prefix) } catch { throw .io("cannot create \(prefix): \(error.cause)") }
        }
        try checkFolder(folder)
    }

    static func checkFolder(_ folder: String) throws(KeyringError) {
        var info = stat()
        guard stat(folder, &info) == 0 else {
            throw .io("cannot stat the keyring folder \(folder): \(describe(errno))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .io("\(folder) is not a folder")
        }
        guard info.st_uid == geteuid() else {
            throw .insecurePermissions("the folder \(folder) belongs to uid \(info.st_uid), not to you (uid \(geteuid())); fix with: chown \(geteuid()) '\(folder)'")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .insecurePermissions("the folder \(folder) is accessible to group or others (mode \(octal(info.st_mode))); fix with: chmod 700 '\(folder)'")
        }
    }

    static func octal(_ mode: mode_t) -> String {
        "0" + String(mode & 0o7777, radix: 8)
    }

    static func describe(_ code: Int32) -> String {
        Errno(rawValue: code).description
    }
}
