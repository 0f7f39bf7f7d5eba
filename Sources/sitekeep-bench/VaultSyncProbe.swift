// `sitekeep-bench vault-sync-probe`: SiteKeep's half of vault-sync alone (no sgit runs but the
// one that makes the vault), for measuring where a clone's and a pull's time goes. Needs the
// same environment as vault-sync (tools/bench sets it). SITEKEEP_PROBE_ROUNDS (5 by default).
@preconcurrency import Glibc
import Foundation
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepVault
import SiteKeepVaultRemotes

func vaultSyncProbe(_ settings: Settings) throws -> [Row] {
    let env = ProcessInfo.processInfo.environment
    guard let url = env["SITEKEEP_BENCH_VAULT_SERVER"], let token = env["SITEKEEP_BENCH_VAULT_TOKEN"],
          let sgit = env["SITEKEEP_BENCH_SGIT"] else {
        throw BenchError.setupFailed("vault-sync-probe needs SITEKEEP_BENCH_VAULT_SERVER, SITEKEEP_BENCH_VAULT_TOKEN and SITEKEEP_BENCH_SGIT")
    }
    let rounds = Int(env["SITEKEEP_PROBE_ROUNDS"] ?? "") ?? 5
    let base = try makeTempDir("vaultprobe")
    defer { try? FileManager.default.removeItem(atPath: base) }
    let home = base + "/home"
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    let childEnv = ["PATH": env["PATH"] ?? "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "NO_COLOR": "1"]
    func sg(_ args: [String], in cwd: String) throws {
        let status = try spawnAndWait([sgit] + args, cwd: cwd, environment: childEnv, stdout: base + "/sgit.out", stderr: base + "/sgit.err")
        guard status == 0 else { throw BenchError.setupFailed("sgit \(args.joined(separator: " ")) exited \(status)") }
    }
    func timed(_ body: () throws -> Void) rethrows -> Double {
        let start = now()
        try body()
        return Double(now() - start) / 1e6
    }
    let id = "probe" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(8))
    let keyText = "bench sync phrase:\(id)"
    let dir = base + "/sg"
    try sg(["init", dir, "--vault-key", keyText], in: base)
    for i in 0..<1000 {
        let folder = "\(dir)/d\(i % 20)"
        if i < 20 { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try Data("file d\(i) \(UUID().uuidString)\n".utf8).write(to: URL(fileURLWithPath: "\(folder)/f\(i).txt"))
    }
    try sg(["commit", "-m", "base"], in: dir)
    try sg(["push", "--base-url", url, "--token", token], in: dir)
    let keys = try SgitKeys.derive(fromKeyText: try SecretBytes(copying: Array(keyText.utf8)))
    func remote() throws -> SGSendRemote {
        try SGSendRemote(baseURL: url, vaultID: keys.vaultID, credentials: BenchCredentials(token: token, keys: keys))
    }
    let signer = try BenchSigner()
    var clones: [Double] = []
    var vault: Vault!
    for r in 0..<rounds {
        clones.append(try timed { vault = try Vault.clone(from: try remote(), into: "\(base)/c\(r)", keys: keys, signer: signer).0 })
    }
    var pulls: [Double] = []
    for r in 0..<max(1, rounds - 2) {
        let writer = try Vault.clone(from: try remote(), into: "\(base)/w\(r)", keys: keys, signer: try BenchSigner()).0
        let changes = try (0..<1000).map { i in (try VaultPath(validating: "n\(r)-\(i % 20)/f\(i).txt"), VaultChange.write(Array("file n\(r) \(i) \(UUID().uuidString)\n".utf8))) }
        _ = try writer.commit(changes, message: "1000 new", signer: try BenchSigner())
        _ = try writer.push(to: try remote(), signer: signer)
        pulls.append(try timed { _ = try vault.pull(from: try remote(), signer: signer) })
    }
    // The remote's reads alone (no fetch around them): 10 reads of 100 blob ids one after the
    // other, and the 1,000 in one read (its batches in flight together).
    let blobIDs = try LocalObjectStore(vaultRoot: vault.root).list(prefix: "bare/data/").sorted()
    var single: [Double] = []
    for i in 0..<10 { let part = Array(blobIDs[(i * 100)..<min(blobIDs.count, (i + 1) * 100)]); single.append(try timed { _ = try remote().read(part) }) }
    var whole: [Double] = []
    for _ in 0..<3 { whole.append(try timed { _ = try remote().read(Array(blobIDs.prefix(1000))) }) }
    // Every tree of the clone decoded from its files (a fresh open each time: no cache).
    var lists: [Double] = []
    let decodeRounds = Int(env["SITEKEEP_PROBE_DECODES"] ?? "") ?? 5
    for _ in 0..<decodeRounds {
        let fresh = try Vault.open(path: vault.root, keys: keys)
        lists.append(try timed { _ = try fresh.list() })
    }
    func fmt(_ xs: [Double]) -> String { xs.map { String(format: "%.0f", $0) }.joined(separator: " ") + String(format: " ms (median %.0f)", median(xs)) }
    print("clone of a 1,000-file vault: " + fmt(clones))
    print("pull of 1,000 new objects:   " + fmt(pulls))
    print("read of 100 blobs:           " + fmt(single))
    print("read of 1,000 blobs:         " + fmt(whole))
    print("list of 1,000 files (cold):  " + fmt(lists))
    return []
}
