#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody
import SiteKeepSystem
import SiteKeepTPM
import SiteKeepTestSupport

/// Unlock by TPM 2.0 slot (swtpm: the one SITEKEEP_TPM_TCTI names, else a private one started
/// here) beside passphrase and PRF-bytes unlock on the same store, and the TPM's PIN lock-out
/// measured on a private swtpm (attempts until locked, time until the right PIN is taken again).
func tpmGroup(_ settings: Settings) throws -> [Row] {
    var table = ExtraTable(title: "Unlock by TPM 2.0 slot (swtpm over TCP: tpm2-tss ESAPI, primary recreated, salted session) beside passphrase (Argon2id floor) and PRF bytes; file keyring; `lock()` between unlocks",
                           header: ["unlock", "unlocks", "p50", "p99", "max", "", ""])
    var own: SoftwareTPM? = nil
    let connection: TPMConnection
    if let tcti = ProcessInfo.processInfo.environment[TPMConnection.environmentVariable] {
        connection = TPMConnection(tcti: tcti)
    } else {
        guard let started = SoftwareTPM.start() else { throw BenchError.setupFailed("swtpm did not start (tools/setup installs it)") }
        own = started
        connection = TPMConnection(tcti: started.tcti)
    }
    defer { own?.stop() }
    try TPM2.setDictionaryAttackParameters(maxTries: 1000, recoverySeconds: 1, lockoutRecoverySeconds: 1, connection: connection)
    let home = try makeTempDir("tpm")
    defer { try? FileManager.default.removeItem(atPath: home) }
    var config = CustodianConfiguration(autoLockTimer: false)
    config.tpmConnection = connection
    let c = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(home: StoreHome(path: home)), configuration: config)
    let pass = Array("bench pass phrase".utf8)
    let prf = SecureRandom.bytes(count: 32)
    _ = try c.initialize(passphrase: try SecretBytes(copying: pass), parameters: .minimum, withRecoveryCode: false)
    _ = try c.addPRFSlot(prfOutput: try SecretBytes(copying: prf), relyingPartyID: "bench.example", credentialID: "AAAA",
                         prfEvalInput: "c2l0ZWtlZXA", current: .passphrase(try SecretBytes(copying: pass)))
    _ = try c.addTPM2Slot(pin: nil, current: .passphrase(try SecretBytes(copying: pass)))
    _ = try c.addTPM2Slot(pin: try SecretBytes(copying: Array("4711".utf8)), current: .passphrase(try SecretBytes(copying: pass)))
    _ = try c.addTPM2Slot(pin: try SecretBytes(copying: Array("4711".utf8)), pcrs: [7], current: .passphrase(try SecretBytes(copying: pass)))
    let tpmSlots = try c.listSlots().filter { $0.kind == .tpm2 }
    guard let bare = tpmSlots.first(where: { $0.tpmPIN == false }), let withPIN = tpmSlots.first(where: { $0.tpmPIN == true && $0.tpmPCRs == [] }),
          let bound = tpmSlots.first(where: { $0.tpmPCRs == [7] }) else { throw BenchError.setupFailed("the TPM slots were not written") }
    c.lock()
    let ways: [(String, () throws -> Void)] = [
        ("passphrase (Argon2id t=2, m=19 MiB)", { try c.unlock(.passphrase(try SecretBytes(copying: pass))) }),
        ("PRF bytes", { try c.unlock(.prf(try SecretBytes(copying: prf))) }),
        ("TPM, no PIN", { try c.unlock(.tpm2(pin: nil), slotID: bare.id) }),
        ("TPM, PIN", { try c.unlock(.tpm2(pin: try SecretBytes(copying: Array("4711".utf8))), slotID: withPIN.id) }),
        ("TPM, PIN + PCR 7 policy", { try c.unlock(.tpm2(pin: try SecretBytes(copying: Array("4711".utf8))), slotID: bound.id) }),
    ]
    let count = max(20, settings.rounds * 10)
    progress(settings, "unlock by passphrase, PRF and TPM: \(count) unlocks each")
    for (name, unlock) in ways {
        try unlock(); c.lock()   // warm up
        var samples: [Double] = []
        for _ in 0..<count {
            let start = now()
            try unlock()
            samples.append(Double(now() - start) / 1e9)
            c.lock()
        }
        table.rows.append([name, "\(samples.count)", String(format: "%.2f ms", percentile(samples, 50) * 1e3),
                           String(format: "%.2f ms", percentile(samples, 99) * 1e3), String(format: "%.2f ms", (samples.max() ?? .nan) * 1e3), "", ""])
    }

    // The PIN lock-out, on a TPM of its own (maxTries 3, recoveryTime 2 s).
    progress(settings, "TPM lock-out: wrong PINs until locked, then the wait until the right PIN is taken")
    if let lockTPM = SoftwareTPM.start() {
        defer { lockTPM.stop() }
        let lc = TPMConnection(tcti: lockTPM.tcti)
        try TPM2.setDictionaryAttackParameters(maxTries: 3, recoverySeconds: 2, lockoutRecoverySeconds: 2, connection: lc)
        let lockHome = try makeTempDir("tpm-lock")
        defer { try? FileManager.default.removeItem(atPath: lockHome) }
        var lconfig = CustodianConfiguration(autoLockTimer: false)
        lconfig.tpmConnection = lc
        let l = try Custodian(home: StoreHome(path: lockHome), keyring: try FileKeyring(home: StoreHome(path: lockHome)), configuration: lconfig)
        _ = try l.initialize(passphrase: try SecretBytes(copying: pass), parameters: .minimum, withRecoveryCode: false)
        let slot = try l.addTPM2Slot(pin: try SecretBytes(copying: Array("right".utf8)), current: .passphrase(try SecretBytes(copying: pass)))
        l.lock()
        var attempts = 0
        var lockedAt: UInt64 = 0
        while attempts < 20 {
            attempts += 1
            do { try l.unlock(.tpm2(pin: try SecretBytes(copying: Array("wrong".utf8))), slotID: slot.id) } catch CustodyError.tpm(.lockedOut) {
                lockedAt = now(); break
            } catch {}
        }
        var recovered: Double = .nan
        while lockedAt != 0, Double(now() - lockedAt) / 1e9 < 30 {
            do {
                try l.unlock(.tpm2(pin: try SecretBytes(copying: Array("right".utf8))), slotID: slot.id)
                recovered = Double(now() - lockedAt) / 1e9
                break
            } catch CustodyError.tpm(.lockedOut) {
                usleep(100_000)
            }
        }
        table.rows.append(["PIN lock-out (maxTries 3, recoveryTime 2 s)", "–", "locked at attempt \(attempts) (\(attempts - 1) wrong PINs counted)",
                           String(format: "right PIN taken again after %.1f s", recovered), "–", "", ""])
    } else {
        table.rows.append(["PIN lock-out", "–", "skipped: swtpm did not start", "–", "–", "", ""])
    }
    extraTables["tpm"] = table
    return []
}
