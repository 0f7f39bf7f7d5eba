// `schedule.set` with the vault mirror on (issue 15, "Must show"): the same socket, dispatcher
// and partition as the core group's row, and behind them the picks mirrored to a real vault, as
// the daemon wires it (`VaultPicksMirror` on the store's vault library, commits signed by the
// device key through custody).
import Foundation
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepPartitions
import SiteKeepVault
import SiteKeepSystem

/// Latencies of `schedule.set` (20 picks) through a `BridgeServer` whose schedule service
/// mirrors to the site's vault: a vault made by the real `sgit`, a store made by the real
/// `sitekeep` (the site Promptugal, the vault given to it), opened and unlocked in-process as the
/// daemon opens it. Every call changes the picks' `at`, so every call merges with the vault's
/// `agenda/picks.json` and commits (the mirror's whole path, not its "nothing changed" skip).
/// Nil when the tools are missing (run through `tools/bench`).
func mirroredScheduleSetLatencies(_ settings: Settings, connections: Int) throws -> [Double]? {
    let env = ProcessInfo.processInfo.environment
    let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let sitekeep = env["SITEKEEP_BENCH_SITEKEEP"] ?? (selfPath as NSString).deletingLastPathComponent + "/sitekeep"
    guard let sgit = env["SITEKEEP_BENCH_SGIT"], FileManager.default.isExecutableFile(atPath: sgit),
          FileManager.default.isExecutableFile(atPath: sitekeep) else { return nil }
    let base = try makeTempDir("core-mirror")
    defer { try? FileManager.default.removeItem(atPath: base) }
    let store = base + "/store", vaultDir = base + "/vault"
    let childEnv = ["PATH": env["PATH"] ?? "/usr/bin:/bin", "HOME": base, "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": base]
    func step(_ argv: [String], in cwd: String = base) throws {
        let status = try spawnAndWait(argv, cwd: cwd, environment: childEnv, stdout: base + "/step.out", stderr: base + "/step.err")
        guard status == 0 else {
            let err = String(decoding: (FileManager.default.contents(atPath: base + "/step.err") ?? Data()).suffix(600), as: UTF8.self)
            throw BenchError.setupFailed("`\(argv.joined(separator: " "))` exited \(status): \(err)")
        }
    }
    progress(settings, "schedule.set with the vault mirror: a vault by \(sgit), a store by \(sitekeep)")
    let keyText = "mirror pass phrase:mirrorv1"
    let pass = base + "/pass", prf = base + "/prf", key = base + "/key"
    try Data("mirror bench pass phrase\n".utf8).write(to: URL(fileURLWithPath: pass))
    try Data(SecureRandom.bytes(count: 32)).write(to: URL(fileURLWithPath: prf))
    try Data(keyText.utf8).write(to: URL(fileURLWithPath: key))
    for f in [pass, prf, key] { chmod(f, 0o600) }
    try step([sgit, "init", vaultDir, "--vault-key", keyText])
    try Data("# picks\n".utf8).write(to: URL(fileURLWithPath: vaultDir + "/README.md"))
    try step([sgit, "commit", "-m", "start"], in: vaultDir)
    let home = ["--home", store, "--keyring", "file"]
    try step([sitekeep, "init"] + home + ["--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19"])
    try step([sitekeep, "slot", "add", "prf"] + home + ["--passphrase-file", pass, "--new-prf-file", prf, "--rp-id", "x", "--credential-id", "AAAA"])
    try step([sitekeep, "site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound"] + home)
    try step([sitekeep, "vault", "add", "picks"] + home + ["--path", vaultDir, "--key-file", key, "--prf-file", prf, "--site", "https://promptugal.news"])

    // The store opened as the daemon opens it.
    let storeHome = StoreHome(path: store)
    let custodian = try Custodian(home: storeHome, keyring: try FileKeyring(home: storeHome))
    try custodian.unlock(.prf(try SecretBytes(copying: Array(FileManager.default.contents(atPath: prf) ?? Data()))))
    defer { custodian.lock() }
    let registry = try SiteRegistry(home: URL(fileURLWithPath: store), keys: custodian)
    registry.watchForChanges()
    let vaults = VaultRegistry(file: store + "/vaults.json")
    let library = VaultLibrary(registry: vaults, keyStore: CustodianVaultKeyStore(custodian: custodian, registry: vaults),
                               signer: { DeviceCommitSigner(custodian: custodian, vaultName: $0) })
    let access = PartitionAccess(registry: registry, lockScope: custodian.lockScope)
    defer { access.closeAll() }
    let service = PartitionScheduleService(access: access, mirror: VaultPicksMirror(library: library))
    let dispatcher = try BridgeDispatcher(catalogue: try OpCatalogue.bundled(), sites: RegistrySiteResolver(registry: registry),
                                          modules: [ScheduleModule(service)])
    let path = base + "/bridge.sock"
    let server = try BridgeServer(dispatcher: dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
    server.start()
    defer { server.shutdown() }

    let at = Int64(1_793_000_000_000)
    var call = Int64(0)
    var latencies: [Double] = []
    // 20 calls per connection (the catalogue's rate limit, as shipped), only the calls timed.
    for c in 0...connections {
        let client = try BridgeClient.connect(path: path)
        defer { client.close() }
        _ = try client.hello(origin: "https://promptugal.news")
        for _ in 0..<20 {
            call += 1
            let picks: JSONValue = .array((0..<20).map { ["id": .string("item-\($0 * 10)"), "at": .int(at + call * 100 + Int64($0))] })
            let start = Clocks.monotonicNanoseconds()
            _ = try client.call("schedule.set", args: ["v": 1, "picks": picks])
            if c > 0 { latencies.append(Double(Clocks.monotonicNanoseconds() - start) / 1e9) }   // the first connection warms up
        }
    }
    // Every call committed: the vault's picks are the last call's.
    let written = try library.vault(named: "picks").read(path: VaultPicksMirror.path)
    guard String(decoding: written, as: UTF8.self).contains("\(at + call * 100)") else {
        throw BenchFailure("the vault's \(VaultPicksMirror.path) does not hold the last schedule.set's picks")
    }
    return latencies
}
