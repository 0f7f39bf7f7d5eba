import Foundation
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepVault

/// libFuzzer entry point: sgit vault objects as a server (or anyone who can write the vault
/// folder) could plant them. The first byte picks the role of the rest:
///
/// - 0 the raw stored bytes of an object (`Envelope.open`: v1 and sgz1);
/// - 1 an sgz1 body: sealed correctly, so the zlib stream itself is fuzzed;
/// - 2 a ref's plaintext (`{"commit_id": ...}`);
/// - 3 a commit's plaintext, which the ref points at;
/// - 4 a tree's plaintext, the root tree of an unsigned template commit;
/// - 5 a branch index's plaintext (`branch_index_v1`), its refs pointing at the template commit.
///
/// Roles 2-5 write a small vault into a private temporary folder, sealed with the read key of
/// the seed vault (made by sgit 0.26.0 with key `fuzz pass:fuzzvlt1`), so the fuzzer gets past
/// the AEAD to the JSON, tree and commit parsers; then open it and read it every way
/// (status, list, log, verify, read). Any outcome but a crash is fine; what opens must list
/// only paths that are safe to join to a folder.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVaultObjects(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0, size <= 1 << 20 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let h = VaultHarness.shared
    switch data[0] % 6 {
    case 0:
        _ = try? Envelope.open(input, key: h.keys.readKey, inflateLimit: 1 << 20)
    case 1:
        guard let sealed = try? Envelope.sealV1(input, key: h.keys.readKey, iv: SecureRandom.bytes(count: 12)) else { return 0 }
        if let out = try? Envelope.open(Envelope.sgz1Magic + sealed, key: h.keys.readKey, inflateLimit: 1 << 20) {
            guard out.count <= 1 << 20 else { trap("sgz1 inflated past its limit") }
        }
    case 2:
        h.reset()
        h.writeRef(h.namedRef, plaintext: input)
        h.exercise()
    case 3:
        h.reset()
        let id = h.writeObject(input)
        h.writeRef(h.namedRef, plaintext: Array("{\"commit_id\": \"\(id)\"}".utf8))
        h.exercise()
    case 4:
        h.reset()
        let tree = h.writeObject(input)
        let commit = h.writeObject(VaultHarness.templateCommit(tree: tree))
        h.writeRef(h.namedRef, plaintext: Array("{\"commit_id\": \"\(commit)\"}".utf8))
        h.exercise()
    default:
        h.reset()
        let tree = h.writeObject(Array("{\"schema\": \"tree_v1\", \"entries\": []}".utf8))
        let commit = h.writeObject(VaultHarness.templateCommit(tree: tree))
        for ref in ["ref-pid-muw-059378a6243a", "ref-pid-snw-1d104f608621"] {
            h.writeRef(ref, plaintext: Array("{\"commit_id\": \"\(commit)\"}".utf8))
        }
        h.writeFile("bare/indexes/" + h.keys.branchIndexFileID, h.seal(input))
        h.exercise()
    }
    return 0
}

final class VaultHarness: @unchecked Sendable {
    // @unchecked: libFuzzer calls the entry point from one thread.
    static let shared = VaultHarness()
    /// The read key of `fuzz pass:fuzzvlt1` (PBKDF2 as sgit derives it), as read-key text.
    static let keyText = "sgit_private_read_708210579209223fda5709fef2d0b664f5e7d26cc54885b5875043f458298fb0:fuzzvlt1"
    /// The author key of the seed vault's commits (public).
    static let authorKeyID = "key-rnd-imm-6ce93a623f7e6308"
    static let authorKeyJSON = #"{"type": "public", "pem": "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE1rfH4Kl2rxY+6H2Op9XoWbRStUJ5\nPcad0yFX07jSwk9rVMnCgO+nAQYGyClj5Dx8DkWMWh1R5EOAKBWWB6QfaQ==\n-----END PUBLIC KEY-----\n"}"#

    let keys: SgitKeys
    let root: String
    var namedRef: String { keys.namedRefFileID }

    private init() {
        do {
            keys = try SgitKeys.derive(fromKeyText: try SecretBytes(copying: Array(Self.keyText.utf8)))
        } catch {
            fatalError("FuzzVaultObjects: the read-key text does not parse: \(error)")
        }
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : FileManager.default.temporaryDirectory.path
        root = base + "/sitekeep-fuzz-vault-\(getpid())"
        atexit { _ = try? FileManager.default.removeItem(atPath: VaultHarness.shared.root) }
        reset()
        // Self-check: the template commit over an empty tree opens and lists, so roles 2-5 reach
        // their parsers rather than failing early.
        let tree = writeObject(Array("{\"schema\": \"tree_v1\", \"entries\": []}".utf8))
        let commit = writeObject(Self.templateCommit(tree: tree))
        writeRef(namedRef, plaintext: Array("{\"commit_id\": \"\(commit)\"}".utf8))
        do {
            let vault = try Vault.open(path: root, keys: keys, options: Self.parserOptions)
            _ = try vault.list()
        } catch {
            fatalError("FuzzVaultObjects: the template vault does not open (\(error)); the harness is out of date with the format")
        }
    }

    /// An unsigned commit over `tree`.
    static func templateCommit(tree: String) -> [UInt8] {
        Array(#"{"schema": "commit_v1", "tree_id": "\#(tree)", "message_enc": null, "branch_id": null, "signature": null, "author_key_id": null, "author_signature": null, "parents": [], "timestamp_ms": 1795964278129, "attestations": []}"#.utf8)
    }

    func reset() {
        try? FileManager.default.removeItem(atPath: root)
        for d in ["bare/data", "bare/refs", "bare/indexes", "bare/keys", "local"] {
            try? FileManager.default.createDirectory(atPath: root + "/.sg_vault/" + d, withIntermediateDirectories: true)
        }
        writeFile("bare/keys/" + Self.authorKeyID, seal(Array(Self.authorKeyJSON.utf8)))
    }

    func seal(_ plaintext: [UInt8]) -> [UInt8] {
        (try? Envelope.sealV1(plaintext, key: keys.readKey, iv: SecureRandom.bytes(count: 12))) ?? []
    }

    func writeFile(_ relative: String, _ bytes: [UInt8]) {
        FileManager.default.createFile(atPath: root + "/.sg_vault/" + relative, contents: Data(bytes))
    }

    /// Seals and stores an object; returns its id (12 hex of SHA-256 of the stored bytes).
    func writeObject(_ plaintext: [UInt8]) -> String {
        let stored = seal(plaintext)
        let id = "obj-cas-imm-" + Hex.encode(SHA256.hash(stored)).prefix(12)
        writeFile("bare/data/" + id, stored)
        return id
    }

    func writeRef(_ name: String, plaintext: [UInt8]) {
        writeFile("bare/refs/" + name, seal(plaintext))
    }

    /// The options the harness reads with: small bounds, and unsigned commits served, so that
    /// a mutated commit, tree or blob reaches its parser instead of stopping at the signature
    /// rule (the template's commits are unsigned, as an author-less fuzzed commit is).
    static let parserOptions: VaultOptions = {
        var options = VaultOptions()
        options.limits.maxCommits = 64
        options.limits.maxListedEntries = 4096
        options.trust = VaultTrust(allowUnsigned: true)
        return options
    }()

    /// Opens the vault and reads it every way; errors are fine, crashes are not. The default
    /// trust rule (unsigned and unknown signers refused) gets every input first, then the
    /// parsers get it with unsigned commits allowed.
    func exercise() {
        var strict = VaultOptions()
        strict.limits = Self.parserOptions.limits
        if let vault = try? Vault.open(path: root, keys: keys, options: strict) {
            _ = try? vault.status()
            _ = try? vault.verify()
        }
        guard let vault = try? Vault.open(path: root, keys: keys, options: Self.parserOptions) else { return }
        _ = try? vault.status()
        _ = try? vault.log(limit: 8)
        _ = try? vault.verify()
        if let entries = try? vault.list() {
            for e in entries.prefix(8) {
                let p = e.path.string
                guard !p.hasPrefix("/"), !p.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == ".." || $0 == "." || $0.isEmpty }),
                      !p.utf8.contains(0) else { trap("a vault listed an unsafe path") }
                _ = try? vault.read(path: p)
            }
        }
    }
}

/// A broken invariant: stop so libFuzzer records the input.
func trap(_ what: StaticString) -> Never {
    fatalError("FuzzVaultObjects invariant broken: \(what)")
}
