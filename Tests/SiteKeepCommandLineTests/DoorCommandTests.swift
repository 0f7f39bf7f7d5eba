import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepTestSupport

/// The door (issue 49): `door enable` on store A puts A's key set on the real vault server
/// (started here on loopback by tools/vault-server, its storage in the test's folder), and
/// `init --restore` makes store B, in a home of its own, from the server and the recovery code
/// alone. Then the refusals, each leaving no store, and every byte the server keeps searched
/// for every secret and name.
@Suite(.serialized) struct DoorCommandTests {
    func sh(_ script: String) -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try? p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Every regular file under `dir`, recursively.
    func files(_ dir: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
        return e.compactMap { $0 as? String }.map { dir + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }

    /// The real vault server on loopback, storage in `dir`; stopped by `stop()`.
    struct Server {
        let script: String, dir: String, url: String, token: String, tokenFile: String
    }

    func startServer(in folder: URL) throws -> Server {
        let script = DocsCommandTests.repository.appendingPathComponent("tools/vault-server").path
        let dir = folder.appendingPathComponent("server").path
        let started = sh("'\(script)' start '\(dir)'")
        #expect(started.0 == 0, "\(started.1)")
        let url = try String(contentsOfFile: dir + "/url", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let token = try String(contentsOfFile: dir + "/token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return Server(script: script, dir: dir, url: url, token: token, tokenFile: dir + "/token")
    }

    func stop(_ s: Server) { _ = sh("'\(s.script)' stop '\(s.dir)'") }

    /// What store B's home holds (nothing, for a refused restore).
    func leftIn(_ home: String) -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: home)) ?? [] }

    @Test func enableOnARestoreBFromTheServerAndTheRecoveryCodeAlone() async throws {
        let a = try CLIStore()
        let server = try startServer(in: a.dir)
        defer { stop(server) }
        let created = try await a.initialize()
        let code = try #require(created["recoveryCode"]?.stringValue)
        let codeFile = try a.file("recovery.txt", Array((code + "\n").utf8))

        // A's key set: a team key from a known seed, a site with a host and a grant, a vault on
        // the server with a token, a setting.
        let seed = [UInt8](repeating: 0x5d, count: 32)
        #expect(await a.run(["team", "import", "summit", "--key-file", try a.file("seed.bin", seed), "--passphrase-file", a.passFile]).status == 0)
        let site = await a.run(["site", "add", "Doortest Reader", "--origin", "https://reader.doortest.example", "--app-bound", "--host", TestHost.runner,
                                "--passphrase-file", a.passFile])
        #expect(site.status == 0, "\(site.err)")
        let grant = await a.run(["site", "grant", "https://reader.doortest.example", "key.sign", "--passphrase-file", a.passFile])
        #expect(grant.status == 0, "\(grant.err)")
        let vaultPassphrase = "door vault phrase \(UUID().uuidString.prefix(8))"
        let vaultID = "skdoor" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyFile = try a.file("vault.key", Array("\(vaultPassphrase):\(vaultID)".utf8))
        let clone = await a.run(["vault", "clone", server.url, "notes", "--key-file", keyFile, "--token-file", server.tokenFile,
                                 "--site", "https://reader.doortest.example", "--passphrase-file", a.passFile])
        #expect(clone.status == 0, "\(clone.err)")
        #expect(await a.run(["vault", "write", "notes", "hello.md", "--passphrase-file", a.passFile], stdin: Array("# from A\n".utf8)).status == 0)
        let pushed = await a.run(["vault", "push", "notes", "--passphrase-file", a.passFile])
        #expect(pushed.status == 0, "\(pushed.err)")
        let publicKey = try #require(try JSONParser.parse(await a.run(["team", "list", "--json"]).out).arrayValue?
            .first { $0["id"]?.stringValue == "summit" }?["publicKey"]?.stringValue)

        // The door, opened by the recovery code init showed.
        let enabled = await a.run(["door", "enable", "--server", server.url, "--token-file", server.tokenFile, "--recovery-file", codeFile,
                                   "--passphrase-file", a.passFile, "--json"])
        #expect(enabled.status == 0, "\(enabled.err)")
        let doorVault = try #require(try JSONParser.parse(enabled.out)["vaultID"]?.stringValue)
        let status = try JSONParser.parse(await a.run(["door", "status", "--json"]).out)
        #expect(status["vaultID"]?.stringValue == doorVault && status["upToDate"] == .bool(true), "\(status)")

        // B: a home of its own, the server's URL, its token and the recovery code; nothing else.
        let b = try CLIStore()
        let bCode = try b.file("recovery.txt", Array(code.lowercased().replacingOccurrences(of: "-", with: " ").utf8))
        let bToken = try b.file("token.txt", Array((server.token + "\n").utf8))
        let restored = await b.run(["init", "--restore", server.url, "--token-file", bToken, "--recovery-file", bCode,
                                    "--passphrase-file", b.passFile, "--argon2-iterations", "2", "--argon2-memory", "19", "--json"])
        #expect(restored.status == 0, "\(restored.err)")
        let r = try JSONParser.parse(restored.out)
        #expect(r["vaultsCloned"] == .array([.string("notes")]), "\(r)")

        // B's team sign verifies under A's public key.
        let message = try b.file("msg", Array("signed on B".utf8))
        let signed = await b.run(["team", "sign", "summit", "--message-file", message, "--passphrase-file", b.passFile, "--json"])
        #expect(signed.status == 0, "\(signed.err)")
        let signature = try Base64.decode(try #require(try JSONParser.parse(signed.out)["signature"]?.stringValue))
        #expect(SignatureVerifier.isValid(signature, for: Array("signed on B".utf8), publicKey: try Base64.decode(publicKey), algorithm: .ed25519))
        // The recovery code unlocks B too.
        #expect(await b.run(["team", "sign", "summit", "--message-file", message, "--recovery-file", bCode]).status == 0)
        // B's vault cat serves A's vault.
        let cat = await b.run(["vault", "cat", "notes", "hello.md", "--passphrase-file", b.passFile, "--json"])
        let b64 = try #require(try JSONParser.parse(cat.out)["dataBase64"]?.stringValue, "\(cat.err)")
        #expect(Data(base64Encoded: b64) == Data("# from A\n".utf8))
        // B's site list shows A's site with its host and grant.
        let sites = await b.run(["site", "list", "--json"])
        #expect(sites.status == 0, "\(sites.err)")
        #expect(sites.out.contains("https://reader.doortest.example") && sites.out.contains("key.sign") && sites.out.contains(TestHost.runner), "\(sites.out)")
        // A new device key: not A's.
        let aDevice = try JSONParser.parse(await a.run(["status", "--json"]).out)["deviceKey"]
        let bDevice = try JSONParser.parse(await b.run(["status", "--json"]).out)["deviceKey"]
        #expect(r["deviceKey"] != nil && (aDevice == nil || aDevice != bDevice))

        // Nothing in the clear on the server: every key, token, passphrase and name.
        let stored = files(server.dir + "/data")
        #expect(!stored.isEmpty)
        let needles: [(String, [UInt8])] = [
            ("the team key's seed", seed), ("the seed in hex", Array(Hex.encode(seed).utf8)), ("the seed in base64", Array(Base64.encode(seed).utf8)),
            ("the access token", Array(server.token.utf8)), ("the store passphrase", Array("correct horse battery".utf8)),
            ("the vault passphrase", Array(vaultPassphrase.utf8)), ("the recovery code", Array(code.utf8)),
            ("the recovery code without dashes", Array(code.replacingOccurrences(of: "-", with: "").utf8)),
            ("the site's name", Array("Doortest Reader".utf8)), ("the site's host", Array("reader.doortest.example".utf8)),
            ("the host program", Array(TestHost.runner.utf8)), ("the team key's name", Array("summit".utf8)),
        ]
        for f in stored {
            let bytes = Array((try? Data(contentsOf: URL(fileURLWithPath: f))) ?? Data())
            for (what, needle) in needles {
                #expect(!contains(bytes, needle), "\(what) is in the server's \(f)")
            }
        }
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return true }
        }
        return false
    }

    @Test func aWrongCodeAFlippedObjectAndAnotherDoorEachRefuseWithNothingWritten() async throws {
        let a = try CLIStore()
        let server = try startServer(in: a.dir)
        defer { stop(server) }
        let code = try #require(try await a.initialize()["recoveryCode"]?.stringValue)
        let codeFile = try a.file("recovery.txt", Array(code.utf8))
        #expect(await a.run(["team", "add", "desk", "--passphrase-file", a.passFile]).status == 0)
        let enabled = await a.run(["door", "enable", "--server", server.url, "--token-file", server.tokenFile, "--recovery-file", codeFile,
                                   "--passphrase-file", a.passFile, "--json"])
        #expect(enabled.status == 0, "\(enabled.err)")
        let doorA = try #require(try JSONParser.parse(enabled.out)["vaultID"]?.stringValue)

        // Another store's door, with another code: C.
        let c = try CLIStore()
        let cCode = try #require(try await c.initialize()["recoveryCode"]?.stringValue)
        let cCodeFile = try c.file("recovery.txt", Array(cCode.utf8))
        let cEnabled = await c.run(["door", "enable", "--server", server.url, "--token-file", server.tokenFile, "--recovery-file", cCodeFile,
                                    "--passphrase-file", c.passFile, "--json"])
        #expect(cEnabled.status == 0, "\(cEnabled.err)")
        let doorC = try #require(try JSONParser.parse(cEnabled.out)["vaultID"]?.stringValue)

        func restore(_ codePath: String) async throws -> (CLIStore, (status: Int32, out: String, err: String)) {
            let b = try CLIStore()
            let r = await b.run(["init", "--restore", server.url, "--token-file", server.tokenFile, "--recovery-file", codePath,
                                 "--passphrase-file", b.passFile, "--argon2-iterations", "2", "--argon2-memory", "19"])
            return (b, r)
        }

        // A wrong code (a valid one, of a store with no door): nothing there, nothing written.
        let d = try CLIStore()
        let dCode = try #require(try await d.initialize()["recoveryCode"]?.stringValue)
        let (b1, wrong) = try await restore(try d.file("recovery.txt", Array(dCode.utf8)))
        #expect(wrong.status == 1 && wrong.err.contains("holds no door for this recovery code"), "\(wrong.err)")
        #expect(!FileManager.default.fileExists(atPath: b1.home), "\(leftIn(b1.home))")

        // A server that answers for A's door with C's: A's code does not open it.
        let data = server.dir + "/data"
        let aFiles = files(data).filter { $0.contains(doorA) }
        let cFiles = files(data).filter { $0.contains(doorC) }
        #expect(!aFiles.isEmpty && !cFiles.isEmpty)
        let aSaved = try aFiles.map { ($0, try Data(contentsOf: URL(fileURLWithPath: $0))) }
        for f in aFiles { try FileManager.default.removeItem(atPath: f) }
        for f in cFiles {
            let target = f.replacingOccurrences(of: doorC, with: doorA)
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: f, toPath: target)
        }
        let (b2, other) = try await restore(codeFile)
        #expect(other.status == 1 && (other.err.contains("could not be read") || other.err.contains("holds no door") || other.err.contains("does not open")), "\(other.err)")
        #expect(!FileManager.default.fileExists(atPath: b2.home), "\(leftIn(b2.home))")

        // A's door back, with one object flipped: the clone's id check refuses it.
        for f in files(data).filter({ $0.contains(doorA) }) { try FileManager.default.removeItem(atPath: f) }
        for (f, bytes) in aSaved { try bytes.write(to: URL(fileURLWithPath: f)) }
        let (good, fine) = try await restore(codeFile)
        #expect(fine.status == 0, "the door put back opens: \(fine.err)")
        _ = good
        let objects = aSaved.filter { $0.0.contains("obj-cas-imm-") }.sorted { $0.1.count > $1.1.count }
        let victim = try #require(objects.first)
        var flipped = victim.1
        flipped[flipped.count / 2] ^= 0x01
        try flipped.write(to: URL(fileURLWithPath: victim.0))
        let (b3, damaged) = try await restore(codeFile)
        #expect(damaged.status == 1 && damaged.err.contains("could not be read"), "\(damaged.err)")
        #expect(!FileManager.default.fileExists(atPath: b3.home), "\(leftIn(b3.home))")
    }
}
