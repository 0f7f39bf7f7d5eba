// `tools/bench vault-sync`: SiteKeep's vault writer and sync against the sgit CLI, in the same
// run, through the real vault server tools/bench starts on loopback (issue 14, "Must show"):
// commit of one changed file in a 1,000-file vault, push of that commit, pull of 1,000 new
// objects, clone of a 1,000-file vault, and pull cost against vault size with 10 new files.
// SiteKeep runs in process (as the daemon runs it); sgit runs as its CLI.
@preconcurrency import Glibc
import Foundation
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepVault
import SiteKeepVaultRemotes

/// A P-256 signer in memory for the benchmark (the product signs with custody's device key).
final class BenchSigner: CommitSigner, @unchecked Sendable {
    let key: P256.Signing.PrivateKey
    init() throws { key = try P256.Signing.PrivateKey() }
    func publicKeyDER() throws(VaultError) -> [UInt8] { key.publicKey.derRepresentation }
    func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try key.signature(for: message).rawRepresentation } catch { throw .signingFailed("\(error)") }
    }
}

struct BenchCredentials: RemoteCredentials {
    let token: String
    let keys: SgitKeys
    func accessToken() throws(VaultError) -> String? { token }
    func writeKeyHex() throws(VaultError) -> String? { keys.writeKeyHex() }
}

func vaultSyncGroup(_ settings: Settings) throws -> [Row] {
    let env = ProcessInfo.processInfo.environment
    guard let url = env["SITEKEEP_BENCH_VAULT_SERVER"], let token = env["SITEKEEP_BENCH_VAULT_TOKEN"],
          let sgit = env["SITEKEEP_BENCH_SGIT"], FileManager.default.isExecutableFile(atPath: sgit) else {
        throw BenchError.setupFailed("vault-sync needs SITEKEEP_BENCH_VAULT_SERVER, SITEKEEP_BENCH_VAULT_TOKEN and SITEKEEP_BENCH_SGIT (tools/bench sets them)")
    }
    let base = try makeTempDir("vaultsync")
    defer { try? FileManager.default.removeItem(atPath: base) }
    let home = base + "/home"
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    let childEnv = ["PATH": env["PATH"] ?? "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "NO_COLOR": "1"]
    func sg(_ args: [String], in cwd: String) throws -> Double {
        let start = now()
        let status = try spawnAndWait([sgit] + args, cwd: cwd, environment: childEnv, stdout: base + "/sgit.out", stderr: base + "/sgit.err")
        let t = Double(now() - start) / 1e9
        guard status == 0 else {
            let err = String(decoding: (FileManager.default.contents(atPath: base + "/sgit.err") ?? Data()).suffix(600), as: UTF8.self)
            throw BenchError.setupFailed("sgit \(args.joined(separator: " ")) exited \(status): \(err)")
        }
        return t
    }
    func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = now()
        try body()
        return Double(now() - start) / 1e9
    }
    func writeFiles(_ dir: String, count: Int, prefix: String) throws {
        for i in 0..<count {
            let folder = "\(dir)/\(prefix)\(i % 20)"
            if i < 20 { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
            try Data("file \(prefix)\(i) \(UUID().uuidString)\n".utf8).write(to: URL(fileURLWithPath: "\(folder)/f\(i).txt"))
        }
    }
    func changes(count: Int, prefix: String) throws -> [(VaultPath, VaultChange)] {
        try (0..<count).map { i in (try VaultPath(validating: "\(prefix)\(i % 20)/f\(i).txt"), .write(Array("file \(prefix)\(i) \(UUID().uuidString)\n".utf8))) }
    }
    let signer = try BenchSigner()
    var n = 0

    /// Two server vaults with the same `size` files, both made and pushed by sgit: X for sgit's
    /// clones, Y for SiteKeep's. Returns sgit's working copy of X and the keys of Y.
    func prepare(size: Int) throws -> (sgitDir: String, keysX: String, keysY: SgitKeys, keyY: String) {
        n += 1
        var out: [String] = []
        for side in ["x", "y"] {
            let id = "bench\(side)\(n)" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(8))
            let keyText = "bench sync phrase:\(id)"
            let dir = "\(base)/\(side)\(n)"
            _ = try sg(["init", dir, "--vault-key", keyText], in: base)
            try writeFiles(dir, count: size, prefix: "d")
            _ = try sg(["commit", "-m", "base"], in: dir)
            _ = try sg(["push", "--base-url", url, "--token", token], in: dir)
            out.append(keyText)
        }
        let ky = try SgitKeys.derive(fromKeyText: try SecretBytes(copying: Array(out[1].utf8)))
        return ("\(base)/x\(n)", out[0], ky, out[1])
    }
    func remote(_ keys: SgitKeys) throws -> SGSendRemote {
        try SGSendRemote(baseURL: url, vaultID: keys.vaultID, credentials: BenchCredentials(token: token, keys: keys))
    }

    var table = ExtraTable(title: "Vault write and sync against sgit 0.26.0, through the real vault server on loopback (SiteKeep in process, as the daemon runs it; sgit as its CLI)",
                           header: ["operation", "SiteKeep", "sgit", "ratio", "target"])
    func add(_ what: String, _ sk: [Double], _ sg: [Double], target: Double = 10) {
        let a = median(sk), b = median(sg)
        let ratio = b / max(a, 1e-9)
        table.rows.append([what, String(format: "%.1f ms", a * 1000), String(format: "%.0f ms", b * 1000), String(format: "%.1f×", ratio), "≥ \(Int(target))×"])
        if ratio < target { table.missed.append("\(what): \(String(format: "%.1f×", ratio))") }
    }

    progress(settings, "vault-sync: two 1,000-file vaults on \(url)")
    let rounds = max(3, settings.slowRounds / 2)
    let (sgDir, keyX, keysY, _) = try prepare(size: 1000)

    // Clone of a 1,000-file vault.
    var skClone: [Double] = [], sgClone: [Double] = []
    var skVault: Vault!
    for r in 0..<rounds {
        let dest = "\(base)/skclone\(r)"
        skClone.append(try timed { skVault = try Vault.clone(from: try remote(keysY), into: dest, keys: keysY, signer: signer).0 })
        sgClone.append(try sg(["clone", keyX, "\(base)/sgclone\(r)", "--base-url", url, "--token", token], in: base))
    }
    add("clone of a 1,000-file vault", skClone, sgClone)

    // Commit of one changed file, then push of that commit.
    var skCommit: [Double] = [], sgCommit: [Double] = [], skPush: [Double] = [], sgPush: [Double] = []
    for r in 0..<rounds {
        let change = try changes(count: 1, prefix: "d")
        skCommit.append(try timed { _ = try skVault.commit(change, message: "one change \(r)", signer: signer) })
        skPush.append(try timed { _ = try skVault.push(to: try remote(keysY), signer: signer) })
        try Data("changed \(r) \(UUID().uuidString)\n".utf8).write(to: URL(fileURLWithPath: "\(sgDir)/d0/f0.txt"))
        sgCommit.append(try sg(["commit", "-m", "one change \(r)"], in: sgDir))
        sgPush.append(try sg(["push", "--base-url", url, "--token", token], in: sgDir))
    }
    add("commit of one changed file (1,000-file vault)", skCommit, sgCommit)
    add("push of that commit", skPush, sgPush)

    // Pull of 1,000 new objects (1,000 new files written and pushed by another clone).
    progress(settings, "vault-sync: pull of 1,000 new objects")
    var skPull: [Double] = [], sgPull: [Double] = []
    for r in 0..<max(1, rounds - 1) {
        let writer = try Vault.clone(from: try remote(keysY), into: "\(base)/skwriter\(r)", keys: keysY, signer: try BenchSigner()).0
        _ = try writer.commit(try changes(count: 1000, prefix: "n\(r)-"), message: "1000 new", signer: try BenchSigner())
        _ = try writer.push(to: try remote(keysY), signer: signer)
        let p = try timed { _ = try skVault.pull(from: try remote(keysY), signer: signer) }
        skPull.append(p)
        let w = "\(base)/sgclone\(r)"
        _ = try sg(["pull", "--base-url", url, "--token", token], in: w)
        try writeFiles(w, count: 1000, prefix: "n\(r)-")
        _ = try sg(["commit", "-m", "1000 new"], in: w)
        _ = try sg(["push", "--base-url", url, "--token", token], in: w)
        sgPull.append(try sg(["pull", "--base-url", url, "--token", token], in: sgDir))
    }
    add("pull of 1,000 new objects", skPull, sgPull)

    // Pull cost against vault size, 10 new files each time.
    let sizes = (env["SITEKEEP_BENCH_SYNC_SIZES"] ?? "100,1000,10000").split(separator: ",").compactMap { Int($0) }
    for size in sizes {
        progress(settings, "vault-sync: pull of 10 new files in a \(size)-file vault")
        let (sDir, kX, kY, _) = try prepare(size: size)
        let mine = try Vault.clone(from: try remote(kY), into: "\(base)/sweep-sk\(size)", keys: kY, signer: signer).0
        let writer = try Vault.clone(from: try remote(kY), into: "\(base)/sweep-skw\(size)", keys: kY, signer: signer).0
        _ = try sg(["clone", kX, "\(base)/sweep-sgw\(size)", "--base-url", url, "--token", token], in: base)
        var a: [Double] = [], b: [Double] = []
        for r in 0..<2 {
            _ = try writer.commit(try changes(count: 10, prefix: "s\(r)-"), message: "10 new", signer: signer)
            _ = try writer.push(to: try remote(kY), signer: signer)
            a.append(try timed { _ = try mine.pull(from: try remote(kY), signer: signer) })
            let w = "\(base)/sweep-sgw\(size)"
            try writeFiles(w, count: 10, prefix: "s\(r)-")
            _ = try sg(["commit", "-m", "10 new"], in: w)
            _ = try sg(["push", "--base-url", url, "--token", token], in: w)
            b.append(try sg(["pull", "--base-url", url, "--token", token], in: sDir))
        }
        add("pull of 10 new files, \(size)-file vault", a, b)
    }
    extraTables["vault-sync"] = table
    return []
}
