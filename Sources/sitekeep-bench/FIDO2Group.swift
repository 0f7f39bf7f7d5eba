// `tools/bench fido2`: unlock by a FIDO2 key's hmac-secret through libfido2, against the software
// CTAP2 authenticator (Tests/SiteKeepSoftFIDO2, here on a thread of this process, over its Unix
// socket and libfido2's transport hooks), beside unlock by the same PRF bytes handed over
// (issue 36, "Must show"). What a plugged key adds (USB round trips, the key's own ECDH and
// signature, the touch itself) is not in these numbers.
@preconcurrency import Glibc
import Foundation
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepSystem

/// Starts a software authenticator on a thread, listening at `socket`; returns once it listens.
private func startSoftAuthenticator(_ socket: String) throws {
    SystemThread.detach {
        let server = SoftFIDO2Server(authenticator: SoftAuthenticator(), socketPath: socket)
        _ = server.run(ready: {})
    }
    for _ in 0..<500 where access(socket, F_OK) != 0 { usleep(10_000) }
    guard access(socket, F_OK) == 0 else { throw BenchError.setupFailed("the software authenticator did not listen on \(socket)") }
}

func fido2Group(_ settings: Settings) throws -> [Row] {
    var table = ExtraTable(title: "Unlock by FIDO2 hmac-secret (libfido2 → software authenticator over a Unix socket; a touch each, given at once; `lock()` between unlocks)",
                           header: ["path", "ops", "p50", "p99", "max"])
    let dir = try makeTempDir("fido2")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let rp = "bench.example"
    let pin = Array("4821".utf8)

    // Two keys: one without a PIN (user presence only), one with (PIN protocol two, a token each time).
    var keys: [(String, FIDO2Key, Bool)] = []
    for (name, withPIN) in [("no PIN", false), ("with PIN", true)] {
        let socket = dir + "/\(withPIN ? "pin" : "plain").sock"
        try startSoftAuthenticator(socket)
        let key = FIDO2Key(path: FIDO2Key.softPrefix + socket, timeoutMilliseconds: 10_000)
        if withPIN { try key.setPIN(try SecretBytes(copying: pin)) }
        keys.append((name, key, withPIN))
    }

    let rounds = max(10, settings.rounds + 3), perRound = 20
    progress(settings, "fido2: \(rounds) rounds × \(perRound) per path")
    for (name, key, withPIN) in keys {
        let credential = try key.makeCredential(rp: rp, userID: Array("bench".utf8), pin: withPIN ? try SecretBytes(copying: pin) : nil)
        let input = SecureRandom.bytes(count: 32)
        let prf = try SoftFIDO2Control(socketPath: String(key.path.dropFirst(FIDO2Key.softPrefix.count)))
            .prfOutput(credentialID: credential.id, evalInput: input, userVerified: withPIN)
        let home = dir + "/home-\(withPIN ? "pin" : "plain")"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(home: StoreHome(path: home)),
                                      configuration: CustodianConfiguration(autoLockTimer: false))
        _ = try custodian.initialize(passphrase: try SecretBytes(copying: Array("bench pass phrase".utf8)), parameters: .minimum, withRecoveryCode: false)
        let slot = try custodian.addPRFSlot(prfOutput: try SecretBytes(copying: prf), relyingPartyID: rp,
                                            credentialID: Base64.encode(credential.id, variant: .urlSafeNoPadding),
                                            prfEvalInput: Base64.encode(input, variant: .urlSafeNoPadding),
                                            current: .passphrase(try SecretBytes(copying: Array("bench pass phrase".utf8))))
        custodian.lock()
        let salt = try custodian.hmacSecretSalt(slotID: slot.id)

        var prfOnly: [Double] = [], hmacOnly: [Double] = [], unlock: [Double] = []
        for _ in 0..<3 {   // warm up
            try custodian.unlock(.prf(try key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: withPIN ? try SecretBytes(copying: pin) : nil)))
            custodian.lock()
        }
        for _ in 0..<rounds {
            for _ in 0..<perRound {
                let keyPIN: SecretBytes? = withPIN ? try SecretBytes(copying: pin) : nil
                var start = now()
                let bytes = try key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: keyPIN)
                let mid = now()
                try custodian.unlock(.prf(bytes), slotID: slot.id)
                let end = now()
                custodian.lock()
                hmacOnly.append(Double(mid - start) / 1e9)
                unlock.append(Double(end - start) / 1e9)
                let given = try SecretBytes(copying: prf)
                start = now()
                try custodian.unlock(.prf(given), slotID: slot.id)
                prfOnly.append(Double(now() - start) / 1e9)
                custodian.lock()
            }
        }
        func row(_ label: String, _ xs: [Double]) -> [String] {
            [label, "\(xs.count)", String(format: "%.2f ms", percentile(xs, 50) * 1e3), String(format: "%.2f ms", percentile(xs, 99) * 1e3),
             String(format: "%.2f ms", (xs.max() ?? .nan) * 1e3)]
        }
        table.rows.append(row("unlock --fido2 (\(name)): hmac-secret + unwrap", unlock))
        table.rows.append(row("  of which hmac-secret through libfido2 (\(name))", hmacOnly))
        table.rows.append(row("unlock by the same PRF bytes handed over", prfOnly))
    }
    extraTables["fido2"] = table
    return []
}
