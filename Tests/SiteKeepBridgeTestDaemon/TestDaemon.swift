import Foundation
import SiteKeepBridge
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepTestSupport

/// The bridge daemon on in-memory services, for the bridge's process-level tests (SIGTERM,
/// socket activation, peers of another uid). Not installed; `sitekeep serve` is the real daemon.
///
/// Environment: `SITEKEEP_SOCK` (or systemd's `LISTEN_FDS`), `SITEKEEP_TEST_AUDIT` (audit file).
@main
struct TestDaemon {
    static func main() {
        let env = ProcessInfo.processInfo.environment
        do {
            let audit = try GroupSyncAuditLog(path: env["SITEKEEP_TEST_AUDIT"] ?? "/dev/null")
            let seed: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0x40 + $0 * 7) }
            let key = SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: SecretBytes(copying: seed)))
            let dispatcher = try InMemoryBridge.dispatcher(signing: HandleSigningService(keys: ["team-ed": key], audit: audit))
            try BridgeDaemon.run(dispatcher: dispatcher, hosts: AnyProcessIsAHost(), ready: { path in
                FileHandle.standardOutput.write(Data("ready \(path ?? "activated")\n".utf8))
            }, onStopped: { audit.close() })
            FileHandle.standardOutput.write(Data("stopped\n".utf8))
        } catch {
            FileHandle.standardError.write(Data("sitekeep-bridge-testd: \(error)\n".utf8))
            exit(1)
        }
    }
}
