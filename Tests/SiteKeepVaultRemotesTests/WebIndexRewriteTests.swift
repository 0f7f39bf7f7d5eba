import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault
@testable import SiteKeepVaultRemotes

/// The sites' web client (sg-vault v0.2.3) rewrites the branch index on every push to one
/// unkeyed `current` entry, dropping sgit's branches and their public keys. Written here as that
/// client writes it (its `writeBranchIndex`), against the real server and a vault sgit signed;
/// `WebVaultClientInteropTests` runs the client's own JS for the same case.
@Suite("The web client's index rewrite", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct WebIndexRewriteTests {
    func remote(_ keys: SgitKeys) throws -> SGSendRemote {
        try SGSendRemote(baseURL: try VaultServer.url(), vaultID: keys.vaultID,
                         credentials: TestCredentials(token: try VaultServer.token(), keys: keys))
    }

    /// Replaces the server's branch index with the one entry sg-vault v0.2.3's push writes.
    func rewriteIndexAsTheWebClientDoes(_ k: SgitKeys) throws {
        let server = try remote(k)
        let indexID = "bare/indexes/" + k.branchIndexFileID
        let current = try server.read([indexID])[indexID]
        let hex = String(k.branchIndexFileID.split(separator: "-").last!)
        let index = #"{"schema":"branch_index_v1","branches":[{"branch_id":"branch-named-\#(hex)","branch_type":"named","head_ref_id":"\#(k.namedRefFileID)","name":"current"}]}"#
        let sealed = try Envelope.sealV1(Array(index.utf8), key: k.readKey, iv: SecureRandom.bytes(count: 12))
        #expect(try server.writeIfMatch(fileID: indexID, bytes: sealed, expected: current))
    }

    /// A vault sgit made, signed and pushed to the server: `notes.md` in one commit, sgit's
    /// working folder in `DIR/a`.
    func sgitSignedVault(_ name: String, notes: String) throws -> (Scratch, Sgit, SgitKeys) {
        let dir = try Scratch(name)
        let sgit = try Sgit(home: dir.path + "/home")
        let keyText = "web index rewrite phrase:\(VaultServer.freshVaultID())"
        try sgit.must(["init", "a", "--vault-key", keyText], in: dir.path)
        try dir.write("a/notes.md", notes)
        try sgit.must(["commit", "-m", "signed"], in: dir.path + "/a")
        try sgit.must(["push", "--base-url", try VaultServer.url(), "--token", try VaultServer.token()], in: dir.path + "/a")
        return (dir, sgit, try keys(keyText))
    }

    @Test("a signer pinned before the rewrite still signs for the vault after it: a fresh clone under the pins serves sgit's signed HEAD")
    func aPinnedSignerOutlivesTheRewrite() throws {
        let (dir, sgit, k) = try sgitSignedVault("webidx", notes: "signed by sgit\n")
        let url = try VaultServer.url(), token = try VaultServer.token()

        // The first look pins sgit's signer (listed by the index then).
        let signer = try MemorySigner()
        let (first, _) = try Vault.clone(from: try remote(k), into: dir.path + "/first", keys: k, signer: signer)
        let pins = try first.currentSigners(source: .user)
        let sgitKey = try #require(try first.log(limit: 1).first?.signerKeyID)
        #expect(pins.contains { $0.keyID == sgitKey })

        try rewriteIndexAsTheWebClientDoes(k)

        // A fresh clone under those pins: the index lists no key now, and the pins decide.
        let trust = LibrarySignerTrust(pins: pins, allowUnsigned: false)
        let (again, _) = try Vault.clone(from: try remote(k), into: dir.path + "/again", keys: k, signer: try MemorySigner(), trust: trust)
        again.setTrust(VaultTrust(signers: .pinned(pins)))
        #expect(try again.read(path: "notes.md") == Array("signed by sgit\n".utf8))
        #expect(try again.status().signers.first { $0.keyID == sgitKey }?.state == .pinned, "status still lists the pinned signer the index dropped")

        // The existing clone pulls the rewritten index and keeps its view of the branches.
        _ = try first.pull(from: try remote(k), signer: signer, trust: trust)
        first.setTrust(VaultTrust(signers: .pinned(pins)))
        #expect(try first.read(path: "notes.md") == Array("signed by sgit\n".utf8))
        #expect(try first.status().signers.contains { $0.keyID == sgitKey && $0.branches.contains { !$0.hasPrefix("pinned") } },
                "the local index still lists sgit's branch")
        // Its next push registers its branch again, as sgit's does, so other clones find its key;
        // the web client's one named entry stays the only `current`.
        _ = try first.commit([(try vp("after.md"), .write(Array("after\n".utf8)))], message: "after", signer: signer)
        _ = try first.push(to: try remote(k), signer: signer)
        let restored = try #require(try first.remoteState(try remote(k)).parsedIndex)
        let mine = try #require(try first.status().branchID)
        #expect(restored.branches.contains { $0.branchID == mine && $0.publicKeyID != nil }, "the push put this clone's branch back")
        #expect(restored.branches.filter { $0.type == "named" && $0.name == "current" }.count == 1)
        // sgit is unaffected, and its next pull restores the index.
        try sgit.must(["pull", "--base-url", url, "--token", token], in: dir.path + "/a")
        #expect(try sgit.must(["cat", "notes.md"], in: dir.path + "/a").out == "signed by sgit\n")
    }

    @Test("with no pins, a signer the rewritten index does not list is refused unless the vault allows unsigned commits")
    func anUnpinnedSignerIsNotChosenByTheIndex() throws {
        let (dir, _, k) = try sgitSignedVault("webidx2", notes: "x\n")
        try rewriteIndexAsTheWebClientDoes(k)
        let e = #expect(throws: VaultError.self) {
            try Vault.clone(from: try remote(k), into: dir.path + "/strict", keys: k, signer: try MemorySigner(),
                            trust: LibrarySignerTrust(pins: [], allowUnsigned: false))
        }
        if case .unverifiedCommit(_, .notInIndex, _, _)? = e {} else { Issue.record("expected not-in-index, got \(String(describing: e))") }
        #expect(e?.description.contains("--trust-signer") == true && e?.description.contains("--allow-unsigned") == false,
                "the refusal names the signer to trust, never unsigned commits: \(String(describing: e))")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/strict/.sg_vault"), "a refused clone leaves nothing")
        let (open, _) = try Vault.clone(from: try remote(k), into: dir.path + "/open", keys: k, signer: try MemorySigner(),
                                        trust: LibrarySignerTrust(pins: [], allowUnsigned: true))
        open.setTrust(VaultTrust(signers: .pinned([]), allowUnsigned: true))
        #expect(try open.read(path: "notes.md") == Array("x\n".utf8))
    }

    /// The first look (`vault clone`, issue 45) admits the signer of the rewritten vault's
    /// history, or only the one `--trust-signer` named (another named key: refused as not in
    /// the index); a signature that does not verify under the key file the server holds (a key
    /// file a forger with the read key replaced on the server) is refused either way.
    /// (Unsigned commits: `WebVaultClientInteropTests`; a missing key file: `TamperTests`.)
    @Test("the first look admits the history's signer, or only the one named; a forged signature is refused")
    func theFirstLookPinsTheHistorysSignerAndRefusesForgeries() throws {
        let (dir, _, k) = try sgitSignedVault("webidx3", notes: "signed\n")
        try rewriteIndexAsTheWebClientDoes(k)
        let (first, _) = try Vault.clone(from: try remote(k), into: dir.path + "/first", keys: k, signer: try MemorySigner(),
                                         trust: FirstLookSignerTrust(allowUnsigned: false, named: []))
        let found = try first.unlistedHistorySigners()
        let sgitKey = try #require(found.first?.keyID, "the clone finds the history's signer")
        let headID = try first.status().headCommit
        #expect(found.count == 1 && found.first?.commits.first == headID, "one signer, of HEAD and its history: \(found)")
        // Served under the pins the registration makes of it (the index lists no key).
        first.setTrust(VaultTrust(signers: .pinned(try first.currentSigners(source: .authenticatedPull))))
        #expect(try first.read(path: "notes.md") == Array("signed\n".utf8))
        #expect(try first.log(limit: 1).first?.signerKeyID == sgitKey)
        let (named, _) = try Vault.clone(from: try remote(k), into: dir.path + "/named", keys: k, signer: try MemorySigner(),
                                         trust: FirstLookSignerTrust(allowUnsigned: false, named: [sgitKey]))
        #expect(try named.unlistedHistorySigners().map(\.keyID) == [sgitKey])
        let other = #expect(throws: VaultError.self) {
            try Vault.clone(from: try remote(k), into: dir.path + "/other", keys: k, signer: try MemorySigner(),
                            trust: FirstLookSignerTrust(allowUnsigned: false, named: ["key-rnd-imm-0123456789abcdef"]))
        }
        if case .unverifiedCommit(_, .notInIndex(sgitKey), _, _)? = other {} else { Issue.record("expected not-in-index, got \(String(describing: other))") }

        // A forger with the read key and the server's storage replaces the signer's key file.
        let server = try remote(k)
        let keyFile = "bare/keys/" + sgitKey
        let current = try server.read([keyFile])[keyFile]
        let forger = try MemorySigner()
        let forged = try Envelope.sealV1(DocumentEncoding.publicKey(pem: forger.key.publicKey.pemRepresentation), key: k.readKey,
                                         iv: SecureRandom.bytes(count: 12))
        #expect(try server.writeIfMatch(fileID: keyFile, bytes: forged, expected: current))
        let bad = #expect(throws: VaultError.self) {
            try Vault.clone(from: try remote(k), into: dir.path + "/forged", keys: k, signer: try MemorySigner(),
                            trust: FirstLookSignerTrust(allowUnsigned: false, named: []))
        }
        if case .badSignature? = bad {} else { Issue.record("expected a bad signature, got \(String(describing: bad))") }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/forged/.sg_vault"), "a refused clone leaves nothing")
    }
}
