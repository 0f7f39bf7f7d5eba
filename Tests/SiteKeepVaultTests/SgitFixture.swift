import Foundation
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepVault

/// Why the interop fixture could not be built. Interop tests FAIL with this message (they are
/// only skipped with SITEKEEP_SKIP_INTEROP=1).
struct FixtureFailure: Error, CustomStringConvertible {
    let description: String
}

enum Interop {
    static var skip: Bool { ProcessInfo.processInfo.environment["SITEKEEP_SKIP_INTEROP"] == "1" }
    static var enabled: Bool { !skip }

    /// The package root, from this file's path.
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The sgit CLI: $SITEKEEP_TEST_SGIT, else .venv/bin/sgit under the package root.
    static func sgitPath() throws(FixtureFailure) -> String {
        if let env = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], !env.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: env) else {
                throw FixtureFailure(description: "SITEKEEP_TEST_SGIT=\(env) is not an executable; run tools/setup (it installs sgit-ai==0.26.0 into .venv)")
            }
            return env
        }
        let local = packageRoot.appendingPathComponent(".venv/bin/sgit").path
        guard FileManager.default.isExecutableFile(atPath: local) else {
            throw FixtureFailure(description: "the sgit CLI was not found (neither $SITEKEEP_TEST_SGIT nor \(local)); run tools/setup, which installs sgit-ai==0.26.0 into .venv (or set SITEKEEP_SKIP_INTEROP=1 to skip the interop tests)")
        }
        return local
    }

    struct Output { let status: Int32; let stdout: [UInt8]; let stderr: String }

    /// Runs sgit with HOME pointed into the fixture's temp dir (sgit writes ~/.sg-send).
    static func run(_ sgit: String, _ args: [String], cwd: String, home: String) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: sgit)
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: cwd)
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home
        env["NO_COLOR"] = "1"
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Read both pipes before waiting, so a large output cannot block the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        p.waitUntilExit()
        return Output(status: p.terminationStatus, stdout: Array(outData), stderr: String(decoding: errData, as: UTF8.self))
    }

    @discardableResult
    static func must(_ sgit: String, _ args: [String], cwd: String, home: String) throws -> Output {
        let o = try run(sgit, args, cwd: cwd, home: home)
        guard o.status == 0 else {
            throw FixtureFailure(description: "sgit \(args.joined(separator: " ")) failed (\(o.status)): \(o.stderr.suffix(800)) \(String(decoding: o.stdout.suffix(800), as: UTF8.self))")
        }
        return o
    }
}

/// What sgit itself says about one vault: its listing and the bytes of every file.
struct SgitView: Sendable {
    struct Item: Sendable { let path: String; let size: Int; let blobID: String; let bytes: [UInt8] }
    let items: [Item]
    let historyIDs: [String]
    let verifyLine: String
}

/// Vaults made once per test run by the real sgit CLI.
final class SgitFixture: Sendable {
    let dir: String
    let home: String
    let sgit: String
    /// Full vault, format 1: nested folders, NFC and NFD names, an empty file, a 1 MiB binary, three commits.
    let plainPath: String
    let plainKeys: SgitKeys
    let plainView: SgitView
    /// `init --packs` vault moved to format 2 (sgz1 blobs, 12- and 32-hex ids).
    let packsPath: String
    let packsKeys: SgitKeys
    let packsView: SgitView
    /// A read-only clone (read key only) of the plain vault.
    let readOnlyPath: String
    let readOnlyKeys: SgitKeys
    let readKeyHex: String
    /// What `sgit vault format --set 2` printed offline.
    let formatSetOutput: String

    static let plainKeyText = "sgit_private_vault_interop pass: with colon:itest01"
    static let packsKeyText = "pack pass:ptest02"

    static let nfc = "caf\u{e9}.txt"
    static let nfd = "cafe\u{301}.txt"

    static let shared: Result<SgitFixture, FixtureFailure> = {
        do { return .success(try SgitFixture()) } catch let f as FixtureFailure { return .failure(f) } catch {
            return .failure(FixtureFailure(description: "building the sgit fixture failed: \(error)"))
        }
    }()

    /// Removed when the test process exits.
    static let cleanupDir = Mutex<String?>(nil)

    static func get() throws -> SgitFixture { try shared.get() }

    static func keys(_ text: String) throws -> SgitKeys {
        try SgitKeys.derive(fromKeyText: try SecretBytes(copying: Array(text.utf8)))
    }

    private init() throws {
        sgit = try Interop.sgitPath()
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-sgit-\(UUID().uuidString)").path
        dir = base
        home = base + "/home"
        Self.cleanupDir.withLock { $0 = base }
        atexit {
            if let d = SgitFixture.cleanupDir.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: d) }
        }
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let fm = FileManager.default

        // Plain vault.
        plainPath = base + "/plain"
        try Interop.must(sgit, ["init", "plain", "--vault-key", Self.plainKeyText], cwd: base, home: home)
        func write(_ rel: String, _ bytes: [UInt8], in root: String) throws {
            let url = URL(fileURLWithPath: root).appendingPathComponent(rel)
            try fm.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        try write("docs/a.txt", Array("hello\n".utf8), in: plainPath)
        try write("docs/sub/deep/d.md", Array("# deep\n".utf8), in: plainPath)
        try write(Self.nfc, Array("composed".utf8), in: plainPath)
        try write(Self.nfd, Array("decomposed".utf8), in: plainPath)
        try write("empty.bin", [], in: plainPath)
        try write("big.bin", SecureRandom.bytes(count: 1 << 20), in: plainPath)
        try write("\u{fc}n\u{ef}/\u{1F600} smile.txt", Array("emoji\n".utf8), in: plainPath)
        try write("data.json", Array("{\"k\": [1, 2, 3]}\n".utf8), in: plainPath)
        try Interop.must(sgit, ["commit", "-m", "first: files"], cwd: plainPath, home: home)
        try write("docs/a.txt", Array("hello again\n".utf8), in: plainPath)
        try write("docs/new.txt", Array("new file\n".utf8), in: plainPath)
        try fm.removeItem(atPath: plainPath + "/data.json")
        try Interop.must(sgit, ["commit", "-m", "second: modify, add, delete \u{2713}"], cwd: plainPath, home: home)

        // Packs vault, then format 2.
        packsPath = base + "/packs"
        try Interop.must(sgit, ["init", "packs", "--packs", "--vault-key", Self.packsKeyText], cwd: base, home: home)
        try write("text/lines.txt", Array((1...2000).map { "line \($0)\n" }.joined().utf8), in: packsPath)
        try write("rnd.bin", SecureRandom.bytes(count: 5000), in: packsPath)
        try write("tiny.txt", Array("x".utf8), in: packsPath)
        try Interop.must(sgit, ["commit", "-m", "packs c1"], cwd: packsPath, home: home)
        let fmt = try Interop.run(sgit, ["vault", "format", "--set", "2"], cwd: packsPath, home: home)
        formatSetOutput = "exit \(fmt.status): " + fmt.stderr + String(decoding: fmt.stdout, as: UTF8.self)
        try write("text/lines.txt", Array((1...3000).map { "row \($0)\n" }.joined().utf8), in: packsPath)
        try write("text/more.md", Array(String(repeating: "compressible ", count: 400).utf8), in: packsPath)
        try Interop.must(sgit, ["commit", "-m", "packs c2 (format 2)"], cwd: packsPath, home: home)

        plainKeys = try Self.keys(Self.plainKeyText)
        packsKeys = try Self.keys(Self.packsKeyText)

        // Read-only clone of the plain vault from its folder (local transport).
        let derived = try Interop.must(sgit, ["vault", "derive-keys", Self.plainKeyText], cwd: base, home: home)
        let text = String(decoding: derived.stdout, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("read_key:") }),
              let hex = line.split(separator: " ").last.map(String.init), hex.count == 64 else {
            throw FixtureFailure(description: "could not find read_key in `sgit vault derive-keys` output: \(text)")
        }
        readKeyHex = hex
        readOnlyPath = base + "/ro"
        try Interop.must(sgit, ["clone", "\(hex):itest01", "ro", "--base-url", plainPath + "/.sg_vault"], cwd: base, home: home)
        readOnlyKeys = try Self.keys("sgit_private_read_\(hex):itest01")

        let (sg, pp, kp, h) = (sgit, plainPath, packsPath, home)
        let views = Mutex<[Int: Result<SgitView, any Error>]>([:])
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let r = Result { try Self.view(sgit: sg, vault: i == 0 ? pp : kp, home: h) }
            views.withLock { $0[i] = r }
        }
        let done = views.withLock { $0 }
        guard let pv = done[0], let kv = done[1] else { throw FixtureFailure(description: "sgit views did not run") }
        plainView = try pv.get()
        packsView = try kv.get()
    }

    /// `sgit ls --json`, `sgit cat` of every file (concurrently), `history log`, `check verify`.
    static func view(sgit: String, vault: String, home: String) throws -> SgitView {
        let ls = try Interop.must(sgit, ["ls", "--json"], cwd: vault, home: home)
        guard case .array(let rows)? = try? JSONParser.parse(ls.stdout) else {
            throw FixtureFailure(description: "sgit ls --json printed no JSON array")
        }
        var meta: [(String, Int, String)] = []
        for r in rows {
            guard let p = r["path"]?.stringValue, let s = r["size"]?.intValue, let b = r["blob_id"]?.stringValue else {
                throw FixtureFailure(description: "unexpected sgit ls --json row \(r)")
            }
            meta.append((p, Int(s), b))
        }
        let fixed = meta
        let results = Mutex<[Int: Result<[UInt8], any Error>]>([:])
        DispatchQueue.concurrentPerform(iterations: fixed.count) { i in
            let r = Result { try Interop.must(sgit, ["cat", fixed[i].0], cwd: vault, home: home).stdout }
            results.withLock { $0[i] = r }
        }
        let all = results.withLock { $0 }
        var items: [SgitView.Item] = []
        for (i, m) in meta.enumerated() {
            guard let r = all[i] else { throw FixtureFailure(description: "sgit cat \(m.0) did not run") }
            items.append(SgitView.Item(path: m.0, size: m.1, blobID: m.2, bytes: try r.get()))
        }
        let log = try Interop.must(sgit, ["history", "log"], cwd: vault, home: home)
        let ids = String(decoding: log.stdout, as: UTF8.self).split(separator: "\n").compactMap { line in
            line.split(separator: " ").first.map(String.init)
        }
        let check = try Interop.must(sgit, ["check", "verify"], cwd: vault, home: home)
        let verifyLine = String(decoding: check.stdout, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        return SgitView(items: items, historyIDs: ids, verifyLine: verifyLine)
    }

    /// A private copy of a fixture vault for a test that changes it.
    func copy(_ path: String) throws -> String {
        let dest = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-vault-\(UUID().uuidString)").path
        try FileManager.default.copyItem(atPath: path, toPath: dest)
        return dest
    }
}

import Synchronization
import SiteKeepJSON
