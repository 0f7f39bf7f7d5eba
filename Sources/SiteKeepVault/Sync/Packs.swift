import SiteKeepJSON
import Synchronization

/// One pack of a pack vault on a remote (feature `packs`, SGIT-FORMAT.md §7.3):
/// `bare/packs/commits|snapshots/<epoch 10 digits>__<commit id>__<bytes>.zip`.
public struct PackFile: Sendable, Equatable {
    public enum Folder: String, Sendable { case commits, snapshots }
    public let fileID: String
    public let folder: Folder
    /// The file name (what `packs_absorbed.json` records).
    public let name: String
    public let epoch: Int
    public let commit: ObjectID
    public let size: Int

    /// The pack a remote names, or nil when `fileID` is not one (only the commit and snapshot
    /// folders; the archive holds nothing a clone needs).
    public static func parse(_ fileID: String) -> PackFile? {
        let parts = fileID.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts[0] == "bare", parts[1] == "packs", let folder = Folder(rawValue: parts[2]),
              parts[3].hasSuffix(".zip") else { return nil }
        let name = parts[3]
        let fields = name.dropLast(4).split(separator: "__", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 3, fields[0].utf8.count == 10, fields[0].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let epoch = Int(fields[0]), let commit = ObjectID(fields[1]),
              (1...12).contains(fields[2].utf8.count), fields[2].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let size = Int(fields[2]) else { return nil }
        return PackFile(fileID: fileID, folder: folder, name: name, epoch: epoch, commit: commit, size: size)
    }
}

/// The objects of one pack zip. sgit writes every member uncompressed (stored) under
/// `bare/data/<object id>`; anything else is refused as a whole (a deflated member could
/// inflate without bound, an encrypted or ZIP64 one is not what sgit writes, and a name that
/// is not a content address could never be verified), so nothing of a bad pack is used.
/// Member bytes are only sliced here; the caller verifies each against its id.
public enum PackArchive {
    static func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
    static func u32(_ b: [UInt8], _ at: Int) -> Int { u16(b, at) | u16(b, at + 2) << 16 }

    /// Every `bare/data/<id>` member of `data`, in central-directory order.
    public static func members(_ data: [UInt8], object: String, maxMembers: Int = 1_000_000) throws(VaultError) -> [(ObjectID, ArraySlice<UInt8>)] {
        func bad(_ why: String) -> VaultError { .malformed(object: object, reason: "not a pack sgit writes: \(why)") }
        let n = data.count
        guard n >= 22 else { throw bad("shorter than a ZIP end record") }
        // The end-of-central-directory record, then nothing but its comment.
        var eocd = -1
        var i = n - 22
        while i >= max(0, n - 22 - 0xFFFF) {
            if u32(data, i) == 0x0605_4b50, i + 22 + u16(data, i + 20) == n { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw bad("no ZIP end record") }
        let count = u16(data, eocd + 10), cdSize = u32(data, eocd + 12), cdOffset = u32(data, eocd + 16)
        guard u16(data, eocd + 4) == 0, u16(data, eocd + 6) == 0, u16(data, eocd + 8) == count else { throw bad("a multi-disk ZIP") }
        guard count != 0xFFFF, cdOffset != 0xFFFF_FFFF, cdSize != 0xFFFF_FFFF else { throw bad("ZIP64") }
        guard count <= maxMembers else { throw .tooLarge(object: object, size: count, limit: maxMembers) }
        guard cdOffset + cdSize <= eocd else { throw bad("the central directory overruns the file") }
        var out: [(ObjectID, ArraySlice<UInt8>)] = []
        out.reserveCapacity(count)
        var names = Set<String>()
        var p = cdOffset
        for _ in 0..<count {
            guard p + 46 <= cdOffset + cdSize, u32(data, p) == 0x0201_4b50 else { throw bad("a broken central directory entry") }
            let flags = u16(data, p + 8), method = u16(data, p + 10)
            let compressed = u32(data, p + 20), size = u32(data, p + 24)
            let nameLen = u16(data, p + 28), extraLen = u16(data, p + 30), commentLen = u16(data, p + 32)
            let local = u32(data, p + 42)
            guard p + 46 + nameLen + extraLen + commentLen <= cdOffset + cdSize else { throw bad("a central directory entry overruns it") }
            let nameBytes = Array(data[(p + 46)..<(p + 46 + nameLen)])
            let name = String(decoding: nameBytes, as: UTF8.self)
            guard flags & 0x1 == 0 else { throw bad("member \(name) is encrypted") }
            guard method == 0, compressed == size else { throw bad("member \(name) is compressed (sgit stores members uncompressed)") }
            guard name.hasPrefix("bare/data/"), let id = FileIDs.objectID(of: name), id.fileID == name else {
                throw bad("member \(name) is not bare/data/<object id>")
            }
            guard names.insert(name).inserted else { throw bad("member \(name) appears twice") }
            // The local header must agree on the name; the data lies before the central directory.
            guard local + 30 <= cdOffset, u32(data, local) == 0x0403_4b50, u16(data, local + 26) == nameLen,
                  local + 30 + nameLen <= cdOffset, Array(data[(local + 30)..<(local + 30 + nameLen)]) == nameBytes else {
                throw bad("member \(name) has no matching local header")
            }
            let start = local + 30 + nameLen + u16(data, local + 28)
            guard start + size <= cdOffset else { throw bad("member \(name) overruns the file") }
            out.append((id, data[start..<(start + size)]))
            p += 46 + nameLen + extraLen + commentLen
        }
        return out
    }
}

/// A remote seen through its packs: `bare/data/` reads answer from the packs this clone has
/// not absorbed yet (every commit pack, then snapshots as a read needs them: the head's own
/// first, then the newest), everything else from the remote itself. What the packs hold is
/// verified by the fetch exactly as loose objects are (id and signature); the pack names are
/// recorded in `local/packs_absorbed.json` (sgit's record) only after the objects are stored.
final class PackedRemote: VaultObjectStore {
    let remote: any VaultObjectStore
    let limits: VaultLimits
    private struct State {
        var objects: [ObjectID: [UInt8]] = [:]
        var snapshots: [PackFile] = []
        var taken: [String] = []
    }
    private let state = Mutex(State())

    var label: String { remote.label }
    var isWritable: Bool { false }

    /// Lists the packs of `remote` and takes every commit pack not in `absorbed`.
    init(remote: any VaultObjectStore, head: ObjectID, absorbed: Set<String>, limits: VaultLimits) throws(VaultError) {
        self.remote = remote
        self.limits = limits
        let commits = try remote.list(prefix: "bare/packs/commits/").compactMap(PackFile.parse)
            .filter { $0.folder == .commits && !absorbed.contains($0.name) }.sorted { ($0.epoch, $0.name) < ($1.epoch, $1.name) }
        var snapshots = try remote.list(prefix: "bare/packs/snapshots/").compactMap(PackFile.parse)
            .filter { $0.folder == .snapshots && !absorbed.contains($0.name) }.sorted { ($0.epoch, $0.name) > ($1.epoch, $1.name) }
        if let own = snapshots.firstIndex(where: { $0.commit == head }) { snapshots.insert(snapshots.remove(at: own), at: 0) }
        state.withLock { $0.snapshots = snapshots }
        try take(commits)
    }

    /// Names of the packs whose objects were offered (to record once they are stored).
    var taken: [String] { state.withLock { $0.taken } }

    private func take(_ packs: [PackFile]) throws(VaultError) {
        guard !packs.isEmpty else { return }
        for p in packs {
            guard p.size <= limits.maxBlobBytes * 4 + (64 << 20) else { throw .tooLarge(object: "\(remote.label) \(p.fileID)", size: p.size, limit: limits.maxBlobBytes * 4 + (64 << 20)) }
        }
        let got = try remote.read(packs.map(\.fileID))
        for p in packs {
            guard let bytes = got[p.fileID] else {
                throw .remote(remote: remote.label, reason: "pack \(p.fileID) is listed but missing; its upload may be in progress, retry", transient: true, retryAfterMs: nil)
            }
            guard bytes.count == p.size else {
                throw .remote(remote: remote.label, reason: "pack \(p.fileID) has \(bytes.count) bytes, its name says \(p.size); retry", transient: true, retryAfterMs: nil)
            }
            let members = try PackArchive.members(bytes, object: "\(remote.label) \(p.fileID)")
            state.withLock { s in
                for (id, slice) in members where s.objects[id] == nil { s.objects[id] = Array(slice) }
                s.taken.append(p.name)
            }
        }
    }

    func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        var rest: [String] = []
        for _ in 0...state.withLock({ $0.snapshots.count }) {
            out = [:]
            rest = []
            state.withLock { s in
                for f in fileIDs {
                    if let id = FileIDs.objectID(of: f), let bytes = s.objects[id] { out[f] = bytes } else { rest.append(f) }
                }
            }
            let wantsObjects = rest.contains { FileIDs.objectID(of: $0) != nil }
            guard wantsObjects, let next = state.withLock({ s -> PackFile? in s.snapshots.isEmpty ? nil : s.snapshots.removeFirst() }) else { break }
            try take([next])
        }
        if !rest.isEmpty { out.merge(try remote.read(rest)) { a, _ in a } }
        return out
    }

    func list(prefix: String) throws(VaultError) -> [String] { try remote.list(prefix: prefix) }
    func write(_ files: [StoredFile]) throws(VaultError) { throw .readOnly(reason: "a pack view is read-only") }
    func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool {
        throw .readOnly(reason: "a pack view is read-only")
    }
}

extension Vault {
    static let packsFeature = "packs"
    var absorbedPacksFile: String { local + "/packs_absorbed.json" }

    /// The pack names this clone has taken in (sgit's `local/packs_absorbed.json`).
    func absorbedPacks() throws(VaultError) -> Set<String> {
        guard case .bytes(let bytes) = try FileAccess.read(absorbedPacksFile, limit: 16 << 20, object: absorbedPacksFile) else { return [] }
        guard let doc = try? JSONParser.parse(bytes, limits: .document) else { return [] }
        return Set((doc["packs"]?.arrayValue ?? []).compactMap(\.stringValue))
    }

    /// Adds `names` to the record, durably (temp file, fsync, rename).
    func recordAbsorbed(_ names: [String]) throws(VaultError) {
        guard !names.isEmpty else { return }
        let all = try absorbedPacks().union(names).sorted()
        let doc = JSONValue.object([JSONMember(key: "packs", value: .array(all.map { .string($0) }))])
        try FileAccess.makeFolders(local)
        try FileAccess.writeDurably(JSONSerializer.bytes(doc, style: .pretty), to: absorbedPacksFile, tempFolder: tempFolder)
    }
}
