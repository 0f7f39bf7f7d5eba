import Foundation
import Testing
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepBridgeProtocol
import SiteKeepTestSupport

/// Issue 48, item 4: the vault family. A parent vault whose `*.link.json` and
/// `.vault/owner/ro-links.json` the sites' web client wrote (its own JavaScript, unmodified,
/// under Node: tools/web-vault `link`, which runs `VaultLinks.saveRoRecord` of the installed
/// package) against the real vault server on loopback (tools/test starts it); then the real
/// `sitekeep` lists the mounts, opens the child read-only and serves its files under the mount
/// path, byte for byte, to the CLI and to the owner site's bridge.
@Suite(.serialized) struct VaultMountsInteropTests {
    typealias Bed = WebVaultClientInteropTests.Bed
    static let client = "v0.2.3"
    static let owner = "https://promptugal.news"

    static func sha256(_ d: Data) -> String { Hex.encode(SHA256.hash(Array(d))) }

    /// A parent and a child vault made by the web client, the child holding two files, the
    /// parent declaring it at `subvaults/acme-demo` with the web client's own link code.
    struct Family {
        let parentKey: String, childKey: String
        let childID: String, mountPath: String
        let files: [String: Data]
    }

    static func family(_ bed: Bed, link: Bool = true) throws -> Family {
        let web = bed.web(client)
        let parentKey = try bed.webVault(client, "family")
        let childKey = try bed.webVault(client, "acme")
        let texts = ["notes/a.md": "# Acme\nwritten by the web client: café ☕ 東京\n", "readme.txt": "child root file\n"]
        for (path, text) in texts { _ = try web.json(["write", path, text], keyFile: childKey, path) }
        var files: [String: Data] = [:]
        for path in texts.keys {
            let read: Data? = try web.read(childKey, path)
            #expect(read != nil, "web-vault read \(path)")
            files[path] = read ?? Data()
        }
        _ = try web.json(["write", "parent.txt", "the parent's own file\n"], keyFile: parentKey)
        var mountPath = "subvaults/acme-demo", childID = ""
        if link {
            let linked = try web.json(["link", "--child-key-file", childKey, "--label", "Acme Demo", "--folder", "subvaults"], keyFile: parentKey, "link")
            mountPath = try #require(linked["mountPath"]?.stringValue, "web-vault link printed no mount path")
            childID = try #require(linked["vaultId"]?.stringValue)
        }
        return Family(parentKey: parentKey, childKey: childKey, childID: childID, mountPath: mountPath, files: files)
    }

    /// `vault mounts NAME --json [extra]`: its status, the parsed array, stderr.
    static func mounts(_ sk: WebVaultClientInteropTests.SiteKeep, _ name: String, _ extra: [String] = []) -> (status: Int32, list: [JSONValue], err: String, out: String) {
        let r = sk.vault(["mounts", name, "--json"] + extra)
        return (r.status, (try? JSONParser.parse(r.out).arrayValue ?? []) ?? [], r.err, r.out)
    }

    static func names(_ sk: WebVaultClientInteropTests.SiteKeep) -> [String] {
        let r = sk.run(["vault", "list", "--json"])
        return ((try? JSONParser.parse(r.out).arrayValue) ?? []).compactMap { $0["name"]?.stringValue }
    }

    // MARK: - Must show

    /// The web client's link and ro-links.json open in SiteKeep: `vault mounts` lists the
    /// mount resolved (no key printed), `--open` clones the child read-only, and `vault cat` and
    /// the owner site's bridge `vault.load` of `<mount>/…` serve the child's files with the
    /// SHA-256 of what the web client wrote; a write under the mount is refused, nothing written;
    /// another site's bridge gets nothing.
    @Test func aVaultFamilyTheWebClientLinkedOpensItsChildrenByteForByte() async throws {
        let bed = try await Bed()
        let sk = bed.sitekeep
        #expect(sk.run(["site", "add", "Promptugal", "--origin", Self.owner, "--app-bound", "--passphrase-file", sk.store.passFile] + TestHost.arguments).status == 0)
        #expect(sk.run(["site", "add", "Other", "--origin", "https://other.example", "--app-bound", "--passphrase-file", sk.store.passFile] + TestHost.arguments).status == 0)
        // Other may call vault.load: what keeps the child from it is the vault's site, not the op's allow-list.
        let grant = sk.run(["site", "grant", "https://other.example", "vault.load", "--passphrase-file", sk.store.passFile])
        #expect(grant.status == 0, "site grant: \(grant.err)")
        let fam = try Self.family(bed)
        #expect(fam.mountPath == "subvaults/acme-demo")
        let clone = sk.clone(bed.url, "family", keyFile: fam.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned", "--site", Self.owner])
        #expect(clone.status == 0, "vault clone: \(clone.err)")

        let listed = Self.mounts(sk, "family")
        #expect(listed.status == 0, "vault mounts: \(listed.err)")
        #expect(listed.list.count == 1)
        let m = try #require(listed.list.first)
        #expect(m["mount"]?.stringValue == fam.mountPath && m["vaultId"]?.stringValue == fam.childID && m["resolved"]?.boolValue == true
                && m["label"]?.stringValue == "Acme Demo", "\(listed.out)")
        #expect(!listed.out.contains("read_key") && !listed.err.contains("read_key"))
        // Before --open, a read under the mount says how to open the child.
        let early = sk.vault(["cat", "family", fam.mountPath + "/readme.txt"])
        #expect(early.status != 0 && early.err.contains("vault mounts family --open"), "\(early.err)")

        let opened = Self.mounts(sk, "family", ["--open"])
        #expect(opened.status == 0, "vault mounts --open: \(opened.err)")
        let child = try #require(opened.list.first?["child"]?.stringValue, "\(opened.out)")
        #expect(opened.list.first?["opened"]?.stringValue == "cloned")
        #expect(Self.names(sk).contains(child))
        for (path, bytes) in fam.files {
            let served = try sk.cat("family", fam.mountPath + "/" + path)
            #expect(Self.sha256(served) == Self.sha256(bytes), "vault cat \(fam.mountPath)/\(path)")
        }
        #expect(try sk.cat("family", "parent.txt") == Data("the parent's own file\n".utf8))

        // A write under the mount is refused, and nothing is written.
        let headBefore = try sk.head("family")
        let write = sk.vault(["write", "family", fam.mountPath + "/notes/b.md"], stdin: "no\n")
        #expect(write.status != 0 && write.err.contains("read-only") && write.err.contains(fam.mountPath), "\(write.err)")
        #expect(try sk.head("family") == headBefore)
        // A second --open pulls the child.
        #expect(Self.mounts(sk, "family", ["--open"]).list.first?["opened"]?.stringValue == "pulled")

        // The owner site's bridge serves the child's files; another site's does not.
        try Self.bridgeServesTheChild(sk, fam)
    }

    /// The failure a bridge call answered (nil: it succeeded).
    static func refusal(_ body: () throws(BridgeError) -> JSONValue) -> BridgeFailure? {
        do { _ = try body(); return nil } catch {
            if case .reply(let f) = error { return f }
            return BridgeFailure(.internal, "\(error)")
        }
    }

    /// `sitekeep serve` on the store: the owner site's `vault.load` of `<mount>/…` gives the
    /// child's bytes, its `vault.save` there is refused, another site gets `not_found`.
    static func bridgeServesTheChild(_ sk: WebVaultClientInteropTests.SiteKeep, _ fam: Family) throws {
        let run = sk.store.dir.appendingPathComponent("r")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let sock = run.appendingPathComponent("bridge.sock").path
        let daemon = try NotificationDeliveryTests.Child(sk.binary, ["serve", "--home", sk.store.home, "--keyring", "file", "--unlock", "--passphrase-file", sk.store.passFile],
                                                         env: ["HOME=\(sk.store.dir.path)", "SITEKEEP_SOCK=\(sock)", "NO_COLOR=1"],
                                                         log: run.appendingPathComponent("serve.log").path)
        defer { daemon.stop() }
        #expect(NotificationDeliveryTests.wait(10) { FileManager.default.fileExists(atPath: sock) }, "\(daemon.output)")
        let host = try TestHost.connect(socket: sock, site: owner, timeout: .seconds(20))
        defer { host.close() }
        _ = try host.hello(origin: owner)
        for (path, bytes) in fam.files {
            let r = try host.call("vault.load", args: ["vault": "family", "path": .string(fam.mountPath + "/" + path)])
            let served = r["content"]?.stringValue.flatMap { Data(base64Encoded: $0) } ?? Data()
            #expect(sha256(served) == sha256(bytes), "vault.load \(path)")
        }
        let save = refusal { () throws(BridgeError) -> JSONValue in
            try host.call("vault.save", args: ["vault": "family", "path": .string(fam.mountPath + "/x.txt"), "content": "eA=="])
        }
        #expect(save?.code == .notAllowed && save?.message.contains("read-only") == true, "\(String(describing: save))")
        let other = try TestHost.connect(socket: sock, site: "https://other.example", timeout: .seconds(20))
        defer { other.close() }
        _ = try other.hello(origin: "https://other.example")
        let load = refusal { () throws(BridgeError) -> JSONValue in
            try other.call("vault.load", args: ["vault": "family", "path": .string(fam.mountPath + "/readme.txt")])
        }
        #expect(load?.code == .notFound, "\(String(describing: load))")
    }

    // MARK: - The daemon's sync

    /// The daemon's sync opens the children with their parent: a parent cloned without
    /// `--open` gets its child at the daemon's first round, the owner site's `vault.load` serves
    /// it, and a file the web client adds to the child later arrives with a later round.
    @Test func theDaemonsSyncPullsChildrenWithTheirParent() async throws {
        let bed = try await Bed()
        let sk = bed.sitekeep, web = bed.web(Self.client)
        #expect(sk.run(["site", "add", "Promptugal", "--origin", Self.owner, "--app-bound", "--passphrase-file", sk.store.passFile] + TestHost.arguments).status == 0)
        let fam = try Self.family(bed)
        #expect(sk.clone(bed.url, "family", keyFile: fam.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned", "--site", Self.owner]).status == 0)
        let child = "family." + fam.childID
        #expect(!Self.names(sk).contains(child))

        let run = sk.store.dir.appendingPathComponent("r")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let sock = run.appendingPathComponent("bridge.sock").path
        let daemon = try NotificationDeliveryTests.Child(sk.binary, ["serve", "--home", sk.store.home, "--keyring", "file", "--unlock", "--passphrase-file", sk.store.passFile,
                                                                     "--sync-every", "2"],
                                                         env: ["HOME=\(sk.store.dir.path)", "SITEKEEP_SOCK=\(sock)", "NO_COLOR=1"],
                                                         log: run.appendingPathComponent("serve.log").path)
        defer { daemon.stop() }
        #expect(NotificationDeliveryTests.wait(60) { Self.names(sk).contains(child) }, "the daemon's sync did not open the child: \(daemon.output)")
        let host = try TestHost.connect(socket: sock, site: Self.owner, timeout: .seconds(20))
        defer { host.close() }
        _ = try host.hello(origin: Self.owner)
        func load(_ path: String) -> Data? {
            guard let r = try? host.call("vault.load", args: ["vault": "family", "path": .string(fam.mountPath + "/" + path)]) else { return nil }
            return r["content"]?.stringValue.flatMap { Data(base64Encoded: $0) }
        }
        #expect(load("readme.txt") == fam.files["readme.txt"])
        _ = try web.json(["write", "later.txt", "written after the clone\n"], keyFile: fam.childKey, "later")
        #expect(NotificationDeliveryTests.wait(60) { load("later.txt") == Data("written after the clone\n".utf8) },
                "a later round did not pull the child: \(daemon.output)")
    }

    // MARK: - Hostile input

    /// A malformed ro-links.json, one over its bounds, a duplicate child, a link back to the
    /// parent and a child registered to another site: each a clear error, nothing opened.
    @Test func hostileMountsAreRefusedWithNothingOpened() async throws {
        let bed = try await Bed()
        let sk = bed.sitekeep, web = bed.web(Self.client)
        #expect(sk.run(["site", "add", "Promptugal", "--origin", Self.owner, "--app-bound", "--passphrase-file", sk.store.passFile] + TestHost.arguments).status == 0)
        #expect(sk.run(["site", "add", "Other", "--origin", "https://other.example", "--app-bound", "--passphrase-file", sk.store.passFile] + TestHost.arguments).status == 0)
        let fam = try Self.family(bed)

        // A duplicate: a second link to the same child.
        _ = try web.json(["link", "--child-key-file", fam.childKey, "--label", "Acme Again"], keyFile: fam.parentKey, "second link")
        #expect(sk.clone(bed.url, "dup", keyFile: fam.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned"]).status == 0)
        let dupList = Self.mounts(sk, "dup")
        #expect(dupList.list.compactMap { $0["state"]?.stringValue } == ["resolved", "duplicate"], "\(dupList.out)")
        let dup = Self.mounts(sk, "dup", ["--open"])
        #expect(dup.status != 0 && dup.err.contains("one mount per child") && dup.err.contains("Nothing was opened"), "\(dup.err)")
        #expect(Self.names(sk) == ["dup"])
        #expect(sk.vault(["remove", "dup"]).status == 0)

        // A cycle: the child links back to the parent.
        let cyc = try Self.family(bed)
        _ = try web.json(["link", "--child-key-file", cyc.parentKey, "--label", "Back"], keyFile: cyc.childKey, "link back")
        #expect(sk.clone(bed.url, "cyc", keyFile: cyc.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned"]).status == 0)
        let cycle = Self.mounts(sk, "cyc", ["--open"])
        #expect(cycle.status != 0 && cycle.err.contains("links back") && cycle.err.contains("link cycle"), "\(cycle.err)")
        #expect(Self.names(sk) == ["cyc"], "the child's clone is removed")
        #expect(!FileManager.default.fileExists(atPath: sk.store.home + "/vaults/cyc." + cyc.childID))

        // A child registered to another site.
        let taken = try Self.family(bed)
        #expect(sk.clone(bed.url, "theirs", keyFile: taken.childKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned", "--site", "https://other.example"]).status == 0)
        #expect(sk.clone(bed.url, "mine", keyFile: taken.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned", "--site", Self.owner]).status == 0)
        let cross = Self.mounts(sk, "mine", ["--open"])
        #expect(cross.status != 0 && cross.err.contains("another site") && cross.err.contains("theirs"), "\(cross.err)")
        #expect(Set(Self.names(sk)) == ["cyc", "theirs", "mine"])

        // A malformed ro-links.json, then one over its bounds.
        let bad = try Self.family(bed)
        _ = try web.json(["write", ".vault/owner/ro-links.json", "{\"lk-1\": {\"read_key\": "], keyFile: bad.parentKey, "malformed ro-links")
        #expect(sk.clone(bed.url, "bad", keyFile: bad.parentKey, tokenFile: bed.tokenFile, extra: ["--allow-unsigned"]).status == 0)
        let malformed = Self.mounts(sk, "bad")
        #expect(malformed.status != 0 && malformed.err.contains("ro-links.json is not valid JSON"), "\(malformed.err)")
        #expect(Self.mounts(sk, "bad", ["--open"]).status != 0)
        // A declaration SiteKeep refuses opens no child and blocks none of the parent's writes.
        let write = sk.vault(["write", "bad", "subvaults/acme-demo/mine.txt"], stdin: "still writable\n")
        #expect(write.status == 0, "a write with a malformed ro-links.json: \(write.err)")
        let many = JSONValue.object((0..<65).map { JSONMember(key: "lk-\($0)", value: ["type": "vault", "vault_id": "abcdefgh"]) })
        _ = try web.json(["write", ".vault/owner/ro-links.json", JSONSerializer.string(many)], keyFile: bad.parentKey, "big ro-links")
        #expect(sk.vault(["pull", "bad"]).status == 0)
        let over = Self.mounts(sk, "bad")
        #expect(over.status != 0 && over.err.contains("65 records, over the limit of 64"), "\(over.err)")
        #expect(Set(Self.names(sk)) == ["cyc", "theirs", "mine", "bad"])
    }
}
