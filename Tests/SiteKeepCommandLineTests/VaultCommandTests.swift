import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepDaemon
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepTestSupport

/// A vault made by the real sgit, with one file.
func makeVault(_ sgit: String, _ path: String, keyText: String, file: String, contents: String) -> Bool {
    guard ChildProcess.run(sgit, ["init", path, "--vault-key", keyText]) == 0 else { return false }
    guard (try? Data(contents.utf8).write(to: URL(fileURLWithPath: path + "/" + file))) != nil else { return false }
    return ChildProcess.run("/bin/sh", ["-c", "cd '\(path)' && '\(sgit)' commit -m one >/dev/null 2>&1"]) == 0
}

/// The store's bridge, in this process: the daemon's own modules (``StoreBridge``) on the
/// bundled catalogue, behind a real socket.
final class InProcessBridge: @unchecked Sendable {
    let server: BridgeServer
    let path: String

    init(_ store: CLIStore) throws {
        let home = StoreHome(path: store.home)
        let custodian = try Custodian(home: home, keyring: try FileKeyring(home: home))
        try custodian.unlock(.passphrase(try SecretBytes(copying: Array("correct horse battery".utf8))))
        let context = StoreContext(home: home, keyring: custodian.keyring, keyringReason: "test", custodian: custodian)
        let dispatcher = try StoreBridge.dispatcher(for: context, environment: [:])
        let run = store.dir.appendingPathComponent("run-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        path = run.appendingPathComponent("bridge.sock").path
        server = try BridgeServer(dispatcher: dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
        server.start()
    }

    func client(_ origin: String) throws -> BridgeClient {
        let c = try BridgeClient.connect(path: path, timeout: .seconds(30))
        _ = try c.hello(origin: origin)
        return c
    }

    deinit { server.shutdown() }
}

/// What `vault cat` printed (through --json: captured output keeps raw bytes apart), or its error.
func catText(_ store: CLIStore, _ args: [String]) async -> String {
    let r = await store.run(["vault", "cat"] + args + ["--json"])
    guard r.status == 0, let b64 = (try? JSONParser.parse(r.out))?["dataBase64"]?.stringValue, let bytes = try? Base64.decode(b64) else { return "error: " + r.err }
    return String(decoding: bytes, as: UTF8.self)
}

/// The failure a bridge call answers, or nil when it succeeded.
func failure(_ body: () throws -> JSONValue) -> BridgeFailure? {
    do { _ = try body(); return nil } catch let BridgeError.reply(f) { return f } catch { return BridgeFailure(.internal, "\(error)") }
}

@Suite(.serialized) struct VaultCommandTests {
    static let promptugal = "https://promptugal.news", summit = "https://web-summit.sgit.ai"

    @Test func aVaultBelongsToOneSiteAndAnotherSitesVaultIsNotFound() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", Self.promptugal, "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["site", "add", "Summit", "--origin", Self.summit, "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let p = store.dir.appendingPathComponent("p").path, w = store.dir.appendingPathComponent("w").path
        #expect(makeVault(sgit, p, keyText: "p pass:pvault01", file: "p.txt", contents: "promptugal's\n"))
        #expect(makeVault(sgit, w, keyText: "w pass:wvault01", file: "backup.json", contents: "summit's backup\n"))
        let pKey = try store.file("p.key", Array("p pass:pvault01".utf8)), wKey = try store.file("w.key", Array("w pass:wvault01".utf8))

        let unknownSite = await store.run(["vault", "add", "x", "--path", p, "--key-file", pKey, "--site", "https://nope.example",
                                           "--passphrase-file", store.passFile, "--json"])
        #expect(unknownSite.status == 1 && unknownSite.err.contains("no site has the origin https://nope.example") && unknownSite.err.contains("\"not_found\""))
        #expect(await store.run(["vault", "add", "pnotes", "--path", p, "--key-file", pKey, "--site", Self.promptugal, "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["vault", "add", "wbackup", "--path", w, "--key-file", wKey, "--site", Self.summit, "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["vault", "add", "cli", "--path", p, "--key-file", pKey, "--passphrase-file", store.passFile]).status == 0)
        let list = try JSONParser.parse(await store.run(["vault", "list", "--json"]).out)
        #expect(list.arrayValue?.compactMap { $0["name"]?.stringValue } == ["pnotes", "wbackup", "cli"])
        #expect(list.arrayValue?.compactMap { $0["owner"]?.stringValue } == ["Promptugal (https://promptugal.news:443)", "Summit (https://web-summit.sgit.ai:443)", "-"])

        let bridge = try InProcessBridge(store)
        let pc = try bridge.client(Self.promptugal)
        defer { pc.close() }
        #expect(try pc.call("vault.load", args: ["vault": "pnotes", "path": "p.txt"])["content"] == .string("cHJvbXB0dWdhbCdzCg=="))
        #expect(try pc.call("vault.load", args: ["path": "p.txt"])["content"] == .string("cHJvbXB0dWdhbCdzCg=="), "its only vault is its default")
        // Another site's vault, a CLI-only vault and a name that does not exist: one reply.
        let theirs = failure { try pc.call("vault.load", args: ["vault": "wbackup", "path": "backup.json"]) }
        let cliOnly = failure { try pc.call("vault.load", args: ["vault": "cli", "path": "p.txt"]) }
        let none = failure { try pc.call("vault.load", args: ["vault": "no-such-vault", "path": "backup.json"]) }
        #expect(theirs?.code == .notFound)
        #expect(theirs == none && cliOnly == none, "\(String(describing: theirs)) / \(String(describing: none))")
        for op in ["vault.list", "vault.status"] {
            #expect(failure { try pc.call(op, args: ["vault": "wbackup"]) } == failure { try pc.call(op, args: ["vault": "no-such-vault"]) })
        }
        #expect(failure { try pc.call("vault.list", args: ["vault": "wbackup"]) }?.code == .notFound)

        // Summit removed, and a new site with its origin: the vault stays out of every site's reach.
        #expect(await store.run(["site", "remove", Self.summit, "--force", "--yes"]).status == 0)
        #expect(await store.run(["site", "add", "Summit again", "--origin", Self.summit, "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let listed = try JSONParser.parse(await store.run(["vault", "list", "--json"]).out)
        #expect(listed.arrayValue?[1]["owner"]?.stringValue?.hasPrefix("removed site ") == true)
        #expect(failure { try pc.call("vault.load", args: ["vault": "wbackup", "path": "backup.json"]) } == none)
    }

    @Test func newSignersAreReportedRefusedAndTrusted() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let a = store.dir.appendingPathComponent("a").path, b = store.dir.appendingPathComponent("b").path
        let keyText = "two pass:twovlt01"
        #expect(makeVault(sgit, a, keyText: keyText, file: "a.txt", contents: "a\n"))
        let key = try store.file("v.key", Array(keyText.utf8))
        #expect(await store.run(["vault", "add", "a", "--path", a, "--key-file", key, "--passphrase-file", store.passFile]).status == 0)
        // A second clone (its own signing key) commits; its folder's bare files are then copied
        // over A's and A's ref set to its HEAD: what anyone who holds the read key and can write
        // A's folder can do (and, through a server, what a pull of a teammate's push looks like).
        #expect(ChildProcess.run(sgit, ["clone", keyText, b, "--base-url", a + "/.sg_vault"]) == 0)
        try Data("b\n".utf8).write(to: URL(fileURLWithPath: b + "/b.txt"))
        #expect(ChildProcess.run("/bin/sh", ["-c", "cd '\(b)' && '\(sgit)' commit -m 'b one' >/dev/null 2>&1"]) == 0)
        let fm = FileManager.default
        let aRefs = Set(try fm.contentsOfDirectory(atPath: a + "/.sg_vault/bare/refs"))
        let aClone = try #require(aRefs.first { $0.hasPrefix("ref-pid-snw-") })
        let bClone = try #require(try fm.contentsOfDirectory(atPath: b + "/.sg_vault/bare/refs").first { $0.hasPrefix("ref-pid-snw-") && !aRefs.contains($0) })
        #expect(ChildProcess.run("/bin/sh", ["-c", "cp -R '\(b)/.sg_vault/bare/.' '\(a)/.sg_vault/bare/' && cp '\(b)/.sg_vault/bare/refs/\(bClone)' '\(a)/.sg_vault/bare/refs/\(aClone)'"]) == 0)

        let unlock = ["--passphrase-file", store.passFile]
        let status = try JSONParser.parse(await store.run(["vault", "status", "a", "--json"] + unlock).out)
        #expect(status["headServed"] == false && status["headTrust"] == "new-signer")
        let newKey = try #require(status["headSigner"]?.stringValue)
        let signers = status["signers"]?.arrayValue ?? []
        #expect(signers.first { $0["keyId"]?.stringValue == newKey }?["state"] == "new", "vault status reports the new signer")
        #expect(signers.filter { $0["state"] == "pinned" }.count == 2)
        let human = await store.run(["vault", "status", "a"] + unlock)
        #expect(human.status == 1 && human.out.contains("NEW") && human.out.contains("sitekeep vault trust a \(newKey)"))
        // The command that meets it fails with vault_unverified naming the commit and the signer.
        let cat = await store.run(["vault", "cat", "a", "b.txt", "--json"] + unlock)
        let error = try JSONParser.parse(cat.err)["error"]
        #expect(cat.status == 1 && error?["code"] == "vault_unverified")
        let message = error?["message"]?.stringValue ?? ""
        #expect(message.contains(newKey) && message.contains("commit bare/data/obj-cas-imm-"), "\(message)")
        let verify = await store.run(["vault", "verify", "a", "--json"] + unlock)
        #expect(verify.status == 1 && verify.err.contains("vault_unverified"))

        // --allow-unsigned serves it and shows; --require-signed refuses it again.
        #expect(await store.run(["vault", "policy", "a", "--allow-unsigned"] + unlock).status == 0)
        #expect(await catText(store, ["a", "b.txt"] + unlock) == "b\n")
        #expect(try JSONParser.parse(await store.run(["vault", "status", "a", "--json"] + unlock).out)["allowUnsigned"] == true)
        #expect(await store.run(["vault", "list"]).out.contains("unsigned ok"))
        #expect(await store.run(["vault", "verify", "a"] + unlock).status == 0)
        #expect(await store.run(["vault", "policy", "a", "--require-signed"] + unlock).status == 0)
        #expect(await store.run(["vault", "cat", "a", "b.txt"] + unlock).status == 1)
        #expect(await store.run(["vault", "policy", "a"] + unlock).status == 64, "one of the two flags is needed")

        // Trusted, the second clone's HEAD is served and the history verifies.
        let trusted = await store.run(["vault", "trust", "a", newKey] + unlock)
        #expect(trusted.status == 0 && trusted.out.contains("Trusted \(newKey)"), "\(trusted.err)")
        #expect(await catText(store, ["a", "b.txt"] + unlock) == "b\n")
        #expect(await store.run(["vault", "verify", "a"] + unlock).status == 0)
        let notASigner = await store.run(["vault", "trust", "a", "key-rnd-imm-00000000deadbeef", "--json"] + unlock)
        #expect(notASigner.status == 1 && notASigner.err.contains("\"not_found\""))

        // --allow-unsigned at add shows in the list.
        #expect(await store.run(["vault", "add", "loose", "--path", a, "--key-file", key, "--allow-unsigned"] + unlock).status == 0)
        let list = try JSONParser.parse(await store.run(["vault", "list", "--json"]).out)
        #expect(list.arrayValue?.map { $0["allowUnsigned"] } == [false, true])
    }

    @Test func aVaultOfAnOlderStoreIsReadableFromTheCLIOnlyUntilAssigned() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", Self.promptugal, "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let v = store.dir.appendingPathComponent("v").path
        #expect(makeVault(sgit, v, keyText: "fixture pass:fixt0001", file: "a.txt", contents: "old store\n"))
        let key = try store.file("v.key", Array("fixture pass:fixt0001".utf8))
        let unlock = ["--passphrase-file", store.passFile]
        #expect(await store.run(["vault", "add", "notes", "--path", v, "--key-file", key] + unlock).status == 0)
        // vaults.json as the code before owners wrote it (the fixture), naming this folder.
        let fixture = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/vaults-before-site-owners.json")
        var old = try String(contentsOf: fixture, encoding: .utf8).replacingOccurrences(of: "/tmp/fx/notes", with: v)
        old = old.replacingOccurrences(of: #"(?s),\s*\{\s*"name": "notes-ro".*?\}"#, with: "", options: .regularExpression)
        try old.write(toFile: store.home + "/vaults.json", atomically: true, encoding: .utf8)
        let listed = try JSONParser.parse(await store.run(["vault", "list", "--json"]).out)
        #expect(listed.arrayValue?.count == 1 && listed.arrayValue?.first?["site"] == .null && listed.arrayValue?.first?["pinnedSigners"] == .null)

        let bridge = try InProcessBridge(store)
        let pc = try bridge.client(Self.promptugal)
        defer { pc.close() }
        #expect(failure { try pc.call("vault.load", args: ["vault": "notes", "path": "a.txt"]) }?.code == .notFound, "no site owns it")
        let cat = await store.run(["vault", "cat", "notes", "a.txt"] + unlock)
        #expect(cat.status == 0)
        #expect(cat.err.contains("registered before SiteKeep pinned signers") && cat.err.contains("vault assign notes --site"))
        #expect(await catText(store, ["notes", "a.txt"] + unlock) == "old store\n")
        #expect(!(await store.run(["vault", "cat", "notes", "a.txt"] + unlock).err.contains("registered before")), "pinned once")
        #expect(await store.run(["vault", "assign", "notes", "--site", Self.promptugal] + unlock).status == 0)
        #expect(try pc.call("vault.load", args: ["vault": "notes", "path": "a.txt"])["content"] == .string("b2xkIHN0b3JlCg=="))
        #expect(await store.run(["vault", "assign", "notes", "--no-site"] + unlock).status == 0)
        #expect(failure { try pc.call("vault.load", args: ["vault": "notes", "path": "a.txt"]) }?.code == .notFound)
    }
}
