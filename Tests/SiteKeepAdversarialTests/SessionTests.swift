import Foundation
import Glibc
import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepKeyring
@testable import SiteKeepCustody

/// One full CLI session against a file-keyring store, made once and shared by the leak scan and
/// the permissions check: init, every slot kind, team keys made and imported (a `#key=` link
/// and a P-256 PKCS#8 file), signing with every unlock method, rotation, sites with storage of
/// both protection classes, a vault made by the real sgit (add, ls, cat, log, verify), failures
/// along the way, lock.
final class FullSession: @unchecked Sendable {
    let folder: TempFolder
    var home: String { folder.path + "/home" }
    /// Every command run, with its output.
    var runs: [ToolRun] = []
    /// Secrets the test chose or was shown, by name (before custody's own material is added).
    var secrets: [(String, [UInt8])] = []
    /// Commands whose output may show the named secret by design (the recovery code is shown once).
    var allowedShows: [(secret: String, runIndex: Int)] = []
    /// The after-login site's raw storage key, which the file keyring holds by design.
    var afterLoginKeys: [[UInt8]] = []
    var custodyMaterial: [[UInt8]] = []
    var sgitPassphrase = ""

    static let shared: Task<FullSession, any Error> = Task { try await FullSession() }

    let passphrase = "adversarial passphrase \(UUID().uuidString.prefix(8))"

    private init() async throws {
        folder = try TempFolder("session")
        let f = folder
        let pass = try f.file("pass.txt", Array((passphrase + "\n").utf8))
        secrets.append(("passphrase", Array(passphrase.utf8)))

        func run(_ args: [String], stdin: [UInt8] = [], expect status: Int32 = 0, sourceLocation: SourceLocation = #_sourceLocation) async -> ToolRun {
            let r = await runTool(args + ["--home", home, "--keyring", "file"], stdin: stdin)
            runs.append(r)
            #expect(r.status == status, "\(args.joined(separator: " ")): \(r.err)", sourceLocation: sourceLocation)
            return r
        }
        func json(_ r: ToolRun) throws -> JSONValue { try JSONParser.parse(r.out) }

        // Store and slots.
        let created = await run(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19", "--json"])
        let code1 = try #require(try json(created)["recoveryCode"]?.stringValue)
        allowedShows.append(("recovery code 1", runs.count - 1))
        let prf = SecureRandom.bytes(count: 32)
        secrets.append(("PRF output", prf))
        let prfFile = try f.file("prf.bin", prf)
        _ = await run(["slot", "add", "prf", "--passphrase-file", pass, "--new-prf-file", prfFile, "--rp-id", "newsroom.sgit.ai",
                       "--credential-id", "Y3JlZA", "--eval-input", "c2l0ZWtlZXA", "--json"])
        let rec = await run(["slot", "add", "recovery", "--passphrase-file", pass, "--json"])
        let code2 = try #require(try json(rec)["recoveryCode"]?.stringValue)
        allowedShows.append(("recovery code 2", runs.count - 1))
        for (name, code) in [("recovery code 1", code1), ("recovery code 2", code2)] {
            secrets.append((name, Array(code.utf8)))
            secrets.append((name, try RecoveryCode.parse(try SecretBytes(copying: Array(code.utf8))).withUnsafeBytes { Array($0) }))
        }
        let recoveryFile = try f.file("recovery.txt", Array(code2.utf8))

        // Team keys: made, and imported from a #key= link and from a PKCS#8 PEM file.
        _ = await run(["team", "add", "ed", "--algorithm", "ed25519", "--passphrase-file", pass, "--json"])
        _ = await run(["team", "add", "pk", "--algorithm", "p256", "--passphrase-file", pass, "--json"])
        let seed = SecureRandom.bytes(count: 32)
        secrets.append(("linked seed", seed))
        let link = try f.file("link.txt", Array("https://newsroom.sgit.ai/join?team=summit#key=\(Base64.encode(seed, variant: .urlSafeNoPadding))\n".utf8))
        _ = await run(["team", "import", "linked", "--key-file", link, "--passphrase-file", pass, "--json"])
        let p256 = try P256.Signing.PrivateKey()
        let der = try p256.pkcs8DER().withUnsafeBytes { Array($0) }
        let pem = try p256.pkcs8PEM().withUnsafeBytes { Array($0) }
        secrets.append(("P-256 PKCS#8 DER", der))
        secrets.append(("P-256 scalar", try #require(Custodian.p256Scalar(inPKCS8: der))))
        let pemFile = try f.file("p256.pem", pem)
        _ = await run(["team", "import", "pkcs", "--key-file", pemFile, "--passphrase-file", pass, "--json"])
        let hexSeed = SecureRandom.bytes(count: 32)
        secrets.append(("hex seed", hexSeed))
        _ = await run(["team", "import", "hexed", "--key-file", "-", "--passphrase-file", pass], stdin: Array(Hex.encode(hexSeed).utf8))

        // Signing with every unlock method, rotation, signing again, verifying.
        let message = try f.file("message.txt", Array("sign me".utf8))
        for unlock in [["--passphrase-file", pass], ["--prf-file", prfFile], ["--recovery-file", recoveryFile]] {
            for key in ["ed", "pk", "linked", "pkcs", "hexed"] {
                _ = await run(["team", "sign", key, "--message-file", message, "--json"] + unlock)
            }
        }
        _ = await run(["team", "rotate", "ed", "--passphrase-file", pass, "--json"])
        _ = await run(["team", "rotate", "pkcs", "--passphrase-file", pass])
        _ = await run(["team", "sign", "pkcs", "--message-file", message, "--der", "--passphrase-file", pass, "--json"])
        let signed = await run(["team", "sign", "pkcs", "--message-file", message, "--passphrase-file", pass, "--json"])
        let signature = try #require(try json(signed)["signature"]?.stringValue)
        _ = await run(["team", "verify", "pkcs", signature, "--message-file", message, "--json"])
        _ = await run(["team", "list", "--json"])
        _ = await run(["team", "list"])
        _ = await run(["slot", "list"])

        // Sites and storage of both classes.
        _ = await run(["site", "add", "Private", "--origin", "https://private.example", "--protection", "when-unlocked",
                       "--app-bound", "--passphrase-file", pass, "--json"])
        _ = await run(["site", "add", "Public", "--origin", "https://public.example", "--json"])
        let valueFile = try f.file("value.txt", Array("{\"picks\":[1,2,3]}".utf8))
        _ = await run(["site", "storage", "set", "https://private.example", "schedule", "--value-file", valueFile, "--passphrase-file", pass])
        _ = await run(["site", "storage", "set", "https://public.example", "theme", "dark"])
        _ = await run(["site", "storage", "get", "https://private.example", "schedule", "--passphrase-file", pass, "--json"])
        _ = await run(["site", "storage", "get", "https://public.example", "theme"])
        _ = await run(["site", "list", "--json"])

        // A vault made by the real sgit.
        let sgit = try sgitPath()
        sgitPassphrase = "sgit vault pass \(UUID().uuidString.prefix(6))"
        let vaultID = "advtest1"
        let keyText = "\(sgitPassphrase):\(vaultID)"
        secrets.append(("sgit passphrase", Array(sgitPassphrase.utf8)))
        secrets.append(("sgit key text", Array(keyText.utf8)))
        for (name, salt) in [("sgit read key", "sg-vault-v1:\(vaultID)"), ("sgit write key", "sg-vault-v1:write:\(vaultID)")] {
            let k = try PBKDF2.deriveKey(password: try SecretBytes(copying: Array(sgitPassphrase.utf8)), salt: Array(salt.utf8), iterations: 600_000)
            secrets.append((name, k.withUnsafeBytes { Array($0) }))
        }
        let sgitHome = f.path + "/sgit-home"
        try FileManager.default.createDirectory(atPath: sgitHome, withIntermediateDirectories: true)
        let env = ["HOME": sgitHome]
        let made = try Child.run(sgit, ["init", "notes", "--vault-key", keyText], in: f.path, environment: env, cwd: f.path)
        #expect(made.code == 0, "sgit init: \(made.err)")
        let vault = f.path + "/notes"
        try FileManager.default.createDirectory(atPath: vault + "/docs", withIntermediateDirectories: true)
        try Data("vault plaintext\n".utf8).write(to: URL(fileURLWithPath: vault + "/docs/a.txt"))
        let committed = try Child.run(sgit, ["commit", "-m", "adversarial"], in: f.path, environment: env, cwd: vault)
        #expect(committed.code == 0, "sgit commit: \(committed.err)")
        let keyFile = try f.file("vault.key", Array((keyText + "\n").utf8))
        _ = await run(["vault", "add", "notes", "--path", vault, "--key-file", keyFile, "--passphrase-file", pass, "--json"])
        let cat = await run(["vault", "cat", "notes", "docs/a.txt", "--passphrase-file", pass])
        #expect(cat.bytes == Array("vault plaintext\n".utf8))
        _ = await run(["vault", "cat", "notes", "docs/a.txt", "--prf-file", prfFile, "--json"])
        _ = await run(["vault", "ls", "notes", "--passphrase-file", pass, "--json"])
        _ = await run(["vault", "log", "notes", "--passphrase-file", pass, "--json"])
        _ = await run(["vault", "verify", "notes", "--passphrase-file", pass, "--json"])
        _ = await run(["vault", "list", "--json"])

        // Failures along the way: wrong secrets, bad key files, refused uses.
        let wrong = try f.file("wrong.txt", Array("not the passphrase".utf8))
        _ = await run(["team", "sign", "ed", "--message-file", message, "--passphrase-file", wrong], expect: 1)
        let badLink = try f.file("badlink.txt", Array("https://x.example/?key=\(Base64.encode(seed, variant: .urlSafeNoPadding))".utf8))
        _ = await run(["team", "import", "bad", "--key-file", badLink, "--passphrase-file", pass], expect: 1)
        _ = await run(["team", "import", "bad2", "--key-file", "-", "--passphrase-file", pass], stdin: Array(Hex.encode(seed).dropLast(2).utf8), expect: 1)
        _ = await run(["vault", "cat", "notes", "missing.txt", "--passphrase-file", pass], expect: 1)
        _ = await run(["team", "sign", "ed", "--message-file", message, "--passphrase", "x"], expect: 64)

        // Unlock, status, logs, lock.
        _ = await run(["unlock", "--passphrase-file", pass, "--json"])
        _ = await run(["status", "--json"])
        _ = await run(["log", "show", "--json", "--limit", "1000"])
        _ = await run(["log", "verify", "--json"])
        _ = await run(["version", "--json"])   // doctor needs a hardened process: HardeningTests runs it as a child
        _ = await run(["lock"])

        // Every key custody holds, from a custodian of the same home.
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(home: StoreHome(path: home)))
        try custodian.unlock(.passphrase(try SecretBytes(copying: Array(passphrase.utf8))))
        custodyMaterial = try custodian.leakScanMaterial()
        custodian.lock()
        let keyring = try FileKeyring(home: StoreHome(path: home))
        for item in try keyring.list(store: custodian.storeID, kind: Custodian.ItemKind.storageKey) {
            afterLoginKeys.append(try keyring.load(item))
        }
    }
}

@Suite struct SessionLeakTests {
    /// Nothing SiteKeep wrote under the home, and nothing any command printed, holds a secret
    /// in raw, hex, base64 or base64url form. Exceptions the design allows, and nothing else:
    /// the recovery code on the stdout of the command that made it (shown once), and an
    /// after-login site key inside the file keyring (protected by file permissions; `doctor`
    /// warns about it).
    @Test func noSecretInAnyFileOrOutputOfAFullSession() async throws {
        let s = try await FullSession.shared.value
        #expect(s.runs.count >= 50)
        var haystacks: [(String, [UInt8])] = []
        let (files, _) = walk(s.home)
        for path in files { haystacks.append((path, Array(try Data(contentsOf: URL(fileURLWithPath: path))))) }
        #expect(files.contains { $0.hasSuffix("/keyring.v1") })
        #expect(files.contains { $0.hasSuffix("/audit.log") })
        #expect(files.contains { $0.hasSuffix("partition.sqlite") })
        for (i, r) in s.runs.enumerated() {
            let name = "run \(i) `\(r.arguments.prefix(3).joined(separator: " "))`"
            haystacks.append(("\(name) stdout", Array(r.out.utf8)))
            haystacks.append(("\(name) stderr", Array(r.err.utf8)))
            haystacks.append(("\(name) bytes", r.bytes))
        }
        var secrets = s.secrets
        for (i, m) in s.custodyMaterial.enumerated() { secrets.append(("custody key \(i)", m)) }
        for (i, k) in s.afterLoginKeys.enumerated() { secrets.append(("after-login site key \(i)", k)) }
        #expect(s.custodyMaterial.count >= 15, "master, wrap keys, 7 team versions (+scalars), device, site, vault")
        #expect(s.afterLoginKeys.count == 1)

        var leaks: [String] = []
        var checked = 0
        for (name, secret) in secrets {
            for form in leakForms(of: secret) {
                for (where_, hay) in haystacks where occurs(form, in: hay) {
                    let runIndex = where_.hasPrefix("run ") ? Int(where_.split(separator: " ")[1]) : nil
                    if name.hasPrefix("recovery code"), s.allowedShows.contains(where: { $0.secret == name && $0.runIndex == runIndex }),
                       where_.hasSuffix("stdout") { continue }
                    if name.hasPrefix("after-login"), where_.hasSuffix("/keyring.v1") { continue }
                    leaks.append("\(name) in \(where_)")
                }
                checked += 1
            }
        }
        #expect(leaks.isEmpty, "\(Set(leaks).sorted())")
        // The scan can see: the planted forms are found, and the allowed shows are real.
        #expect(haystacks.contains { occurs(Array(s.secrets.first { $0.0 == "recovery code 1" }!.1), in: $0.1) })
        #expect(occurs(leakForms(of: s.custodyMaterial[0])[4], in: Array(("x" + Base64.encode([7] + s.custodyMaterial[0]) + "y").utf8)))
        Attack.report("leak-scan", "\(secrets.count) secrets x \(leakForms(of: s.custodyMaterial[0]).count) forms over \(files.count) files + \(s.runs.count) commands' stdout/stderr; leaks: \(leaks.count)")
    }

    /// Every folder under the home is 0700 and every file 0600, owned by us. The home itself
    /// too. No exceptions in the design: SQLite's -wal/-shm files inherit 0600 from the database.
    @Test func everyFolderIs0700AndEveryFile0600() async throws {
        let s = try await FullSession.shared.value
        let (files, folders) = walk(s.home)
        #expect(mode(s.home) == 0o700)
        var wrong: [String] = []
        for d in folders where mode(d) != 0o700 { wrong.append("\(d): \(String(mode(d), radix: 8))") }
        for f in files where mode(f) != 0o600 { wrong.append("\(f): \(String(mode(f), radix: 8))") }
        for p in files + folders {
            var st = stat()
            if lstat(p, &st) == 0, st.st_uid != getuid() { wrong.append("\(p): owned by uid \(st.st_uid)") }
        }
        #expect(wrong.isEmpty, "\(wrong)")
        #expect(files.count >= 6 && folders.count >= 2)
        Attack.report("permissions", "\(folders.count + 1) folders, \(files.count) files checked; wrong: \(wrong.count)")
    }
}
