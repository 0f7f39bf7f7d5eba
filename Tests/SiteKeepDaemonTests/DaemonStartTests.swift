import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import SiteKeepBridgeProtocol
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepDaemon
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepPartitions
import SiteKeepSocket
import SiteKeepTestSupport

/// The daemon as a host starts it: through SiteKeepDaemon's API alone (this target does not
/// link the command line), on a fresh store, a real bridge socket and a real control socket.
@Suite(.serialized) struct DaemonStartTests {
    static let passphrase = "correct horse battery"

    /// A fresh store in `dir/store` (file keyring) with one app-bound site; returns its home.
    static func freshStore(_ dir: URL) throws -> String {
        let home = dir.appendingPathComponent("store").path
        let store = try OpenStore.open(home: home, keyring: .file, creating: true)
        _ = try store.custodian.initialize(passphrase: SecretBytes(copying: Array(passphrase.utf8)), parameters: .minimum,
                                           withRecoveryCode: false)
        _ = try store.registry().add(displayName: "News", origins: ["https://news.example"], appBound: true, hosts: try TestHost.hosts())
        return home
    }

    @Test func aHostStartsTheDaemonUnlocksItThroughControlAndCallsTheBridge() throws {
        let dir = try Fixtures.temporaryDirectory("sitekeep-daemon")
        defer { try? FileManager.default.removeItem(at: dir) }
        let home = try Self.freshStore(dir)
        let run = dir.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var options = DaemonOptions(environment: ["SITEKEEP_NOTIFY": "print"])
        options.keyring = .file
        options.syncIntervalSeconds = 0
        options.bridgeSocket = run.appendingPathComponent("bridge.sock").path
        let daemon = try Daemon.open(home: home, options: options)
        try daemon.start()
        defer { daemon.stop() }
        #expect(throws: DaemonError.self) { try daemon.start() }
        let bridgePath = try #require(daemon.bridgePath)
        let controlPath = try #require(daemon.controlPath)
        #expect(controlPath == run.appendingPathComponent("control.sock").path)

        // Locked: the control socket says so, and unlocks the daemon with the passphrase.
        let storeID = try #require(OpenStore.storeID(home: home))
        #expect(try ControlClient.send(path: controlPath, store: storeID, op: "status")?["unlocked"] == false)
        let secret = Array(Self.passphrase.utf8)
        let unlocked = try secret.withUnsafeBytes { try ControlClient.send(path: controlPath, store: storeID, op: "unlock", method: "passphrase", secret: $0) }
        #expect(unlocked?["ok"] == true, "\(String(describing: unlocked))")
        #expect(daemon.store.custodian.isUnlocked)

        // The bridge: hello binds the site, and one op round-trips through its partition.
        let client = try TestHost.connect(socket: bridgePath, site: "https://news.example", timeout: .seconds(30))
        let (_, ops) = try client.hello(origin: "https://news.example")
        #expect(ops.contains("storage.set") && ops.contains("storage.get"))
        _ = try client.call("storage.set", args: ["key": "k", "value": "v"])
        #expect(try client.call("storage.get", args: ["key": "k"])["value"] == "v")
        #expect(try client.call("storage.keys")["keys"] == ["k"])

        // `run` is the command line's: a host that sets no runCommand refuses it, saying why.
        let fd = try #require(try ControlClient.connect(path: controlPath))
        #expect(UnixSocket.writeAll(fd, ControlClient.header(op: "run", store: storeID, extra: [JSONMember(key: "argv", value: ["site", "list"])])))
        let refused = try ControlClient.readReply(fd)
        close(fd)
        #expect(refused["code"] == "bad_request" && refused["error"]?.stringValue?.contains("runs no commands") == true, "\(refused)")

        // Stop: the sockets go, custody locks.
        daemon.stop()
        #expect(!FileManager.default.fileExists(atPath: bridgePath))
        #expect(!FileManager.default.fileExists(atPath: controlPath))
        #expect(!daemon.store.custodian.isUnlocked)
        #expect(throws: BridgeError.self) { try client.call("storage.get", args: ["key": "k"]) }
    }

    @Test func openingAFolderWithoutAStoreCreatesNothingAndSaysSo() throws {
        let dir = try Fixtures.temporaryDirectory("sitekeep-daemon")
        defer { try? FileManager.default.removeItem(at: dir) }
        let typo = dir.appendingPathComponent("typo").path
        var options = DaemonOptions(environment: [:])
        options.keyring = .file
        #expect(throws: DaemonError("there is no SiteKeep store in \(typo)",
                                    remedy: "create one with 'sitekeep init --home \(typo)', or point --home (or SITEKEEP_HOME) at your store",
                                    code: "no_store")) {
            try Daemon.open(home: typo, options: options)
        }
        #expect(!FileManager.default.fileExists(atPath: typo))
    }
}
