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
import SiteKeepNames

/// Starts a software authenticator on a thread, listening at `socket`; returns once it listens.
private func startSoftAuthenticator(_ socket: String) throws {
    SystemThread.detach {
        let server = SoftFIDO2Server(authenticator: SoftAuthenticator(), socketPath: socket)
        _ = server.run(ready: {})
    }
    for _ in 0..<500 where access(socket, F_OK) != 0 { usleep(10_000) }
    guard access(socket, F_OK) == 0 else { throw BenchError.setupFailed("the software authenticator did not listen on \(socket)") }
}

private func row(_ label: String, _ xs: [Double]) -> [String] {
    [label, "\(xs.count)", String(format: "%.2f ms", percentile(xs, 50) * 1e3), String(format: "%.2f ms", percentile(xs, 99) * 1e3),
     String(format: "%.2f ms", (xs.max() ?? .nan) * 1e3)]
}

func fido2Group(_ settings: Settings) throws -> [Row] {
    var table = ExtraTable(title: "Unlock by FIDO2 hmac-secret and presence by touch (libfido2 → software authenticator over a Unix socket; a touch each, given at once; `lock()` between unlocks)",
                           header: ["path", "ops", "p50", "p99", "max"])
    let dir = try makeTempDir("fido2")
    defer { try? FileManager.default.removeItem(atPath: dir) }
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
    let passphrase = Array("bench pass phrase".utf8)
    for (name, key, withPIN) in keys {
        func keyPIN() throws -> SecretBytes? { withPIN ? try SecretBytes(copying: pin) : nil }
        let home = dir + "/home-\(withPIN ? "pin" : "plain")"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.fido2Key = key
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(home: StoreHome(path: home)), configuration: configuration)
        _ = try custodian.initialize(passphrase: try SecretBytes(copying: passphrase), parameters: .minimum, withRecoveryCode: false)
        // `slot add fido2`: a credential on the key, a PRF slot from its output.
        let slot = try custodian.addFIDO2Slot(pin: try keyPIN(), current: .passphrase(try SecretBytes(copying: passphrase)))
        guard let credential = slot.credentialID.flatMap({ try? Base64.decode($0, variant: .urlSafeNoPadding) }),
              let input = slot.prfEvalInput.flatMap({ try? Base64.decode($0, variant: .urlSafeNoPadding) }) else {
            throw BenchError.setupFailed("the FIDO2 slot names no credential")
        }
        let prf = try SoftFIDO2Control(socketPath: String(key.path.dropFirst(FIDO2Key.softPrefix.count)))
            .prfOutput(credentialID: credential, evalInput: input, userVerified: withPIN)
        custodian.lock()

        var prfOnly: [Double] = [], unlock: [Double] = []
        for _ in 0..<3 {   // warm up
            try custodian.unlock(.fido2(pin: try keyPIN()))
            custodian.lock()
        }
        for _ in 0..<rounds {
            for _ in 0..<perRound {
                let given = try keyPIN()
                var start = now()
                try custodian.unlock(.fido2(pin: given))
                unlock.append(Double(now() - start) / 1e9)
                custodian.lock()
                let bytes = try SecretBytes(copying: prf)
                start = now()
                try custodian.unlock(.prf(bytes), slotID: slot.id)
                prfOnly.append(Double(now() - start) / 1e9)
                custodian.lock()
            }
        }
        table.rows.append(row("unlock --fido2 (\(name)): which slot (no touch), hmac-secret, unwrap", unlock))
        table.rows.append(row("unlock by the same PRF bytes handed over (\(name))", prfOnly))

        // Presence by touch: a team-key signature approved by a verified touch, beside one
        // approved by a proof the caller brings.
        if !withPIN {
            try custodian.unlock(.passphrase(try SecretBytes(copying: passphrase)))
            _ = try custodian.generateTeamKey(id: "bench", name: "bench")
            let proof = { (op: OpName) throws -> PresenceProof in
                PresenceProof(client: .commandLine, op: op, keyID: try KeyID(parsing: "bench"), method: .secret,
                              issuedAtNanoseconds: BootClock.system.nanoseconds())
            }
            let message = Array(repeating: UInt8(7), count: 64)
            func signatures() throws -> [Double] {
                var times: [Double] = []
                for _ in 0..<(rounds * perRound) {
                    let context = KeyUseContext(client: .commandLine, op: .teamSign, presence: try proof(.teamSign))
                    let start = now()
                    _ = try custodian.signature(keyID: "bench", message: message, context: context)
                    times.append(Double(now() - start) / 1e9)
                }
                return times
            }
            let proved = try signatures()
            _ = try custodian.requireTouch(keyID: "bench", context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp,
                                                                                  presence: try proof(Custodian.presencePolicyOp)))
            let touched = try signatures()
            custodian.lock()
            table.rows.append(row("team-key signature, approved by a proof brought", proved))
            table.rows.append(row("team-key signature, approved by a touch (verified assertion)", touched))
        }
    }
    extraTables["fido2"] = table
    return []
}
