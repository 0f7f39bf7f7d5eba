import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepTestSupport

/// A throw-away store home with a passphrase file, driven through the real command line.
final class CLIStore: StoreFolder, @unchecked Sendable {
    init() throws { try super.init(label: "sk-cli") }

    func run(_ args: [String], stdin: [UInt8] = [], typing: [String]? = nil) async -> (status: Int32, out: String, err: String) {
        await runTool(args + ["--home", home, "--keyring", "file"], stdin: stdin, promptAnswers: typing.map { $0.map { Array($0.utf8) } })
    }

    /// `init` at the cheapest Argon2id parameters (tests are not about the cost).
    func initialize() async throws -> JSONValue {
        let r = await run(["init", "--passphrase-file", passFile, "--argon2-iterations", "2", "--argon2-memory", "19", "--json"])
        #expect(r.status == 0, "init failed: \(r.err)")
        return try JSONParser.parse(r.out)
    }
}

@Suite struct CustodyCommandTests {
    @Test func initSignAndVerifyWithEveryUnlockMethod() async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let code = try #require(created["recoveryCode"]?.stringValue)
        #expect(code.split(separator: "-").count == 8)

        let prf = try store.file("prf.bin", SecureRandom.bytes(count: 32))
        let added = await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", prf,
                                     "--rp-id", "newsroom.sgit.ai", "--credential-id", "AAAA"])
        #expect(added.status == 0, "\(added.err)")
        let key = await store.run(["team", "add", "summit", "--passphrase-file", store.passFile, "--json"])
        #expect(key.status == 0, "\(key.err)")
        let publicKey = try Base64.decode(try #require(try JSONParser.parse(key.out)["publicKey"]?.stringValue))

        let message = try store.file("msg", Array("sign me".utf8))
        let recovery = try store.file("recovery.txt", Array(code.utf8))
        for unlock in [["--passphrase-file", store.passFile], ["--prf-file", prf], ["--recovery-file", recovery]] {
            let r = await store.run(["team", "sign", "summit", "--message-file", message, "--json"] + unlock)
            #expect(r.status == 0, "sign with \(unlock[0]) failed: \(r.err)")
            let signature = try Base64.decode(try #require(try JSONParser.parse(r.out)["signature"]?.stringValue))
            #expect(SignatureVerifier.isValid(signature, for: Array("sign me".utf8), publicKey: publicKey, algorithm: .ed25519))
            let v = await store.run(["team", "verify", "summit", Base64.encode(signature), "--message-file", message])
            #expect(v.status == 0)
        }
        let log = await store.run(["log", "verify", "--json"])
        #expect(log.status == 0)
        #expect(try JSONParser.parse(log.out)["intact"] == .bool(true))
    }

    /// `log verify` finds a log cut short and a log rewritten from its genesis (issue 12), through
    /// the anchor each command leaves in the keyring when it exits.
    @Test func logVerifyFindsACutTailAndARewrittenLog() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        // A command anchors its lines as it exits when the anchor is older than a second.
        usleep(1_100_000)
        #expect(await store.run(["team", "add", "desk", "--passphrase-file", store.passFile]).status == 0)
        let log = store.home + "/audit.log"
        let good = try Data(contentsOf: URL(fileURLWithPath: log))
        let v = try JSONParser.parse(await store.run(["log", "verify", "--json"]).out)
        let lines = try #require(v["lines"]?.intValue)
        #expect(v["intact"] == .bool(true) && v["anchoredThrough"]?.intValue == lines, "\(v)")

        // The tail cut off: the chain of the rest is whole, the anchor is not reached.
        let cut = Data(good.split(separator: 0x0a).dropLast().joined(separator: [0x0a]) + [0x0a])
        try cut.write(to: URL(fileURLWithPath: log))
        let c = await store.run(["log", "verify", "--json"])
        #expect(c.status == 1 && c.err.contains("log_broken") && c.err.contains("cut from the end"), "\(c.err)")

        // A new chain from the same genesis, longer than the real one.
        let storeID = try String(contentsOfFile: store.home + "/store-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let forged = store.dir.appendingPathComponent("forged.log").path
        let fake = try AuditLog(path: forged, genesis: AuditLog.genesis(storeID: storeID))
        for _ in 0...lines { try fake.append(client: .local, op: "status", key: nil, result: "ok") }
        fake.flush()
        try FileManager.default.removeItem(atPath: log)
        try FileManager.default.copyItem(atPath: forged, toPath: log)
        let r = await store.run(["log", "verify"])
        #expect(r.status == 1 && r.err.contains("rewritten"), "\(r.err)")

        try good.write(to: URL(fileURLWithPath: log))
        #expect(await store.run(["log", "verify"]).status == 0)
    }

    @Test func p256SignaturesVerifyInRawAndDERForm() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "desk", "--algorithm", "p256", "--passphrase-file", store.passFile]).status == 0)
        let message = try store.file("m", Array("hello".utf8))
        for form in [[String](), ["--der"]] {
            let s = await store.run(["team", "sign", "desk", "--message-file", message, "--passphrase-file", store.passFile, "--json"] + form)
            let sig = try #require(try JSONParser.parse(s.out)["signature"]?.stringValue)
            let v = await store.run(["team", "verify", "desk", sig, "--message-file", message])
            #expect(v.status == 0, "\(form): \(v.err)")
        }
    }

    @Test func aWrongPassphraseFailsWithoutSayingWhy() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let wrong = try store.file("wrong.txt", Array("not it".utf8))
        let r = await store.run(["team", "add", "x", "--passphrase-file", wrong])
        #expect(r.status == 1)
        #expect(r.err.contains("error:"))
        #expect(!r.err.contains("not it"))
    }

    @Test func aStoreKeepsItsKeyringBackend() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let r = await runTool(["status", "--home", store.home, "--keyring", "secret-service"])
        #expect(r.status == 1)
        #expect(r.err.contains("keeps its keys in the file keyring"))
        let auto = await runTool(["status", "--home", store.home, "--json"])
        #expect(auto.status == 0)
        #expect(try JSONParser.parse(auto.out)["keyring"] == .string("file"))
    }

    @Test func initTwiceIsRefused() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let again = await store.run(["init", "--passphrase-file", store.passFile])
        #expect(again.status == 1)
        #expect(again.err.contains("already initialised"))
    }

    @Test func thePRFSaltMatchesTheWebAuthnTransform() async throws {
        let r = await runTool(["prf", "salt", "--eval-input", "c2l0ZWtlZXA", "--json"])
        #expect(r.status == 0)
        let expected = WebAuthnPRF.hmacSecretSalt(forEvalInput: Array("sitekeep".utf8))
        #expect(try JSONParser.parse(r.out)["saltHex"] == .string(Hex.encode(expected)))
    }
}
