import SiteKeepJSON
package import SiteKeepCrypto

/// The declared mounts of a vault (`*.link.json` files and `.vault/owner/ro-links.json`), read
/// with bounds, and the read credential of a child (in guarded memory, for custody).
///
/// As the web client: a link whose JSON is malformed or has no `ref_id` is an ordinary file; a
/// link of another type (`link`, `video`, …) is no mount; links are taken in path order and the
/// first of two naming the same child (or `ref_id`) wins. Unlike the web client, which reads a
/// malformed `ro-links.json` as empty, SiteKeep refuses it with an error naming the problem: a
/// credential file it cannot read is never silently taken for "no children".
public enum VaultMounts {
    /// The suffix that makes a file a link.
    public static let linkSuffix = ".link.json"
    /// The owner record holding the children's read keys (the parent's read-key tier).
    public static let roLinksPath = ".vault/owner/ro-links.json"
    /// A link file's size limit (the web client writes about 100 bytes).
    public static let maxLinkFileBytes = 16 * 1024
    /// `ro-links.json`'s size limit.
    public static let maxRoLinksBytes = 256 * 1024
    /// At most this many links in one vault, and records in its `ro-links.json`.
    public static let maxMounts = 64

    static let linkLimits = JSONLimits(maxBytes: maxLinkFileBytes, maxDepth: 8, maxStringBytes: 4096, maxElements: 64)
    static let roLinksLimits = JSONLimits(maxBytes: maxRoLinksBytes, maxDepth: 8, maxStringBytes: 4096, maxElements: 256)

    /// Whether `path` is a link file (`*.link.json`, any case, as the web client's regex).
    public static func isLinkFile(_ path: String) -> Bool {
        path.lowercased().hasSuffix(linkSuffix) && path.utf8.count > linkSuffix.utf8.count
    }

    /// The mounts `vault` declares, in link-path order.
    /// - Throws: ``VaultError/mount(_:)`` for more than ``maxMounts`` links, a link file over
    ///   ``maxLinkFileBytes``, or an `ro-links.json` that is malformed or over its bounds.
    public static func declared(in vault: Vault) throws(VaultError) -> [DeclaredMount] {
        let links = try vault.list(path: nil).filter { isLinkFile($0.path.string) }.sorted { $0.path < $1.path }
        guard links.count <= maxMounts else {
            throw .mount("vault \(vault.vaultID) declares \(links.count) *.link.json files, over the limit of \(maxMounts); nothing was opened")
        }
        let records = try roRecords(in: vault)
        var out: [DeclaredMount] = []
        var seenVault: [String: String] = [:], seenRef: [String: String] = [:]
        for entry in links {
            let path = entry.path.string
            guard entry.size <= maxLinkFileBytes else {
                throw .mount("the link file \(path) is \(entry.size) bytes, over the limit of \(maxLinkFileBytes) (a link holds a few fields); nothing was opened")
            }
            guard let link = parseLink(try vault.read(path: path)) else { continue }
            let record = records[link.refID]
            let type = link.type ?? record?.type ?? ((link.vaultID ?? record?.vaultID) != nil ? "vault" : nil)
            if let type, type != "vault" { continue }
            let childID = link.vaultID ?? record?.vaultID
            let mountPath = String(path.dropLast(linkSuffix.count))
            let label = link.label ?? record?.label ?? String(mountPath.split(separator: "/").last ?? "")
            let state: DeclaredMount.State
            if let first = (childID.flatMap { seenVault[$0] }) ?? seenRef[link.refID] {
                state = .duplicate(of: first)
            } else if childID == vault.vaultID {
                state = .cycle
            } else if let record {
                state = credentialProblem(link: link, record: record).map { .noCredential($0) } ?? .resolved
            } else {
                state = .noCredential("no record for ref_id \(quoted(link.refID)) in \(roLinksPath)")
            }
            if case .duplicate = state {} else {
                if let childID { seenVault[childID] = path }
                seenRef[link.refID] = path
            }
            out.append(DeclaredMount(linkPath: path, mountPath: mountPath, refID: link.refID, label: label, childVaultID: childID, state: state))
        }
        return out
    }

    /// The child's read credential, `<64 hex read key>:<vault id>` (the sgit read-key form
    /// ``SiteKeepCustody/SgitKeys`` parses), in guarded memory; the decoded key bytes are wiped.
    /// - Throws: ``VaultError/mount(_:)`` when the mount has no usable credential.
    package static func credential(for mount: DeclaredMount, in vault: Vault) throws(VaultError) -> SecretBytes {
        guard mount.isResolved, let childID = mount.childVaultID, let record = try roRecords(in: vault)[mount.refID],
              var key = decodedKey(record.readKey) else {
            throw .mount("the link \(mount.linkPath) has no usable credential in \(roLinksPath)")
        }
        defer { for i in key.indices { key[i] = 0 } }
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64 + 1 + childID.utf8.count)
        for b in key { text.append(digits[Int(b >> 4)]); text.append(digits[Int(b & 0x0f)]) }
        text.append(UInt8(ascii: ":"))
        text.append(contentsOf: childID.utf8)
        do { return try SecretBytes(consumingAndZeroing: &text) } catch {
            throw .keysUnavailable("the child's read key could not be kept in guarded memory: \(error)")
        }
    }

    // MARK: - Parsing

    struct Link { var refID: String; var vaultID: String?; var type: String?; var label: String? }
    struct Record { var vaultID: String?; var readKey: String?; var type: String?; var label: String? }

    /// A link file as `VaultLinks.parseLinkFile`: nil (an ordinary file) for bad JSON, a
    /// non-object or a missing `ref_id`.
    static func parseLink(_ bytes: [UInt8]) -> Link? {
        guard let v = try? JSONParser.parse(bytes, limits: linkLimits), v.objectValue != nil,
              let ref = v["ref_id"]?.stringValue, !ref.isEmpty else { return nil }
        return Link(refID: ref, vaultID: nonEmpty(v["vault_id"]), type: nonEmpty(v["type"]), label: nonEmpty(v["label"]))
    }

    /// The records of `ro-links.json` by `ref_id` (empty when the file is absent).
    static func roRecords(in vault: Vault) throws(VaultError) -> [String: Record] {
        let entries: [VaultEntry]
        do { entries = try vault.list(path: roLinksPath) } catch .notFound { return [:] }
        guard let entry = entries.first(where: { $0.path.string == roLinksPath }) else { return [:] }
        guard entry.size <= maxRoLinksBytes else {
            throw .mount("\(roLinksPath) is \(entry.size) bytes, over the limit of \(maxRoLinksBytes); nothing was opened")
        }
        var bytes = try vault.read(path: roLinksPath)
        defer { for i in bytes.indices { bytes[i] = 0 } }
        let value: JSONValue
        do { value = try JSONParser.parse(bytes, limits: roLinksLimits) } catch {
            throw .mount("\(roLinksPath) is not valid JSON (\(error)); nothing was opened. Rewrite it from the web client (remove and add the link again)")
        }
        guard let members = value.objectValue else {
            throw .mount("\(roLinksPath) must be a JSON object of records by ref_id, found \(value.typeName); nothing was opened")
        }
        guard members.count <= maxMounts else {
            throw .mount("\(roLinksPath) holds \(members.count) records, over the limit of \(maxMounts); nothing was opened")
        }
        var out: [String: Record] = [:]
        for m in members {
            guard m.value.objectValue != nil else {
                throw .mount("\(roLinksPath): the record \(quoted(m.key)) must be a JSON object, found \(m.value.typeName); nothing was opened")
            }
            out[m.key] = Record(vaultID: nonEmpty(m.value["vault_id"]), readKey: nonEmpty(m.value["read_key"]),
                                type: nonEmpty(m.value["type"]), label: nonEmpty(m.value["label"]))
        }
        return out
    }

    /// Why a record gives the link no credential (nil: it does), as `resolveCredentials` and
    /// `MountLanes.laneBinding` judge it: a 32-byte base64 read key, for the link's vault.
    static func credentialProblem(link: Link, record: Record) -> String? {
        guard let readKey = record.readKey else { return "its record in \(roLinksPath) has no read_key" }
        guard var key = decodedKey(readKey) else { return "its record's read_key is not a 32-byte base64 key" }
        for i in key.indices { key[i] = 0 }
        if let a = link.vaultID, let b = record.vaultID, a != b {
            return "the link names vault \(quoted(a)) but its record holds the key of vault \(quoted(b))"
        }
        guard let id = link.vaultID ?? record.vaultID else { return "neither the link nor its record names the child's vault_id" }
        guard ServerVaultID.isValid(id) else { return "the child's vault_id \(quoted(id)) is not a vault id" }
        return nil
    }

    static func decodedKey(_ text: String?) -> [UInt8]? {
        guard let text, let bytes = try? Base64.decode(text, variant: .standard), bytes.count == 32 else { return nil }
        return bytes
    }

    static func nonEmpty(_ v: JSONValue?) -> String? {
        guard let s = v?.stringValue, !s.isEmpty else { return nil }
        return s
    }

    static func quoted(_ s: String) -> String { VaultError.quoted(String(s.prefix(80))) }
}
