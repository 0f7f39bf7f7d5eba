public import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepSystem

/// Passphrase slots: the passphrase's UTF-8 bytes through Argon2id, with parameters
/// calibrated to this machine (``PassphraseKDF``) and kept in the header. The command line's
/// default unlock method: `--passphrase-file`, else typed at the prompt.
public enum PassphraseSlot: SlotKind {
    public static let name = "passphrase"
    public static let stored = StoredSlotKind(name: "passphrase", code: 1, kdf: .argon2id)
    public static let unlockInput = SlotUnlockInput.secret(option: "--passphrase-file", prompt: "SiteKeep passphrase: ")
    public static let underBackoff = true

    /// Refuses a missing passphrase.
    package static func prepare(_ secret: consuming SecretBytes?) throws(CustodyError) -> SecretBytes? {
        switch consume secret {
        case .some(let p): return p
        case .none: throw .invalidArgument("no passphrase was given")
        }
    }
}

extension StoredSlotKind {
    /// A passphrase slot (``PassphraseSlot``).
    public static let passphrase = PassphraseSlot.stored
}

extension UnlockSecret {
    /// A passphrase (its UTF-8 bytes).
    public static func passphrase(_ passphrase: consuming SecretBytes) -> UnlockSecret {
        UnlockSecret(PassphraseSlot.self, secret: passphrase)
    }
}

/// Argon2id parameters for new passphrase slots.
public enum PassphraseKDF: Sendable {
    /// The most memory calibration picks (256 MiB); beyond that it adds passes.
    public static let calibrationMemoryCeilingKiB = 256 * 1024

    /// Picks Argon2id parameters so one derivation takes about `target` on this machine, never
    /// below ``Argon2id/Parameters/minimum``. Memory grows first (t = 3, or t = 2 on machines
    /// too slow for 19 MiB at t = 3) up to ``calibrationMemoryCeilingKiB``, then passes.
    ///
    /// Measures rather than extrapolates: time per KiB grows with memory (page faults, cache),
    /// so it derives at the candidate parameters and rescales, up to four times, until a
    /// derivation lands within 20 % of `target`. Takes about two to three targets' time.
    public static func calibrate(target: Duration = .milliseconds(500)) throws(CustodyError) -> Argon2id.Parameters {
        let password = try cryptoCall { () throws(CryptoError) in try SecretBytes(randomCount: 16) }
        let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
        let targetNs = Double(PresenceProof.nanoseconds(target))
        func measure(_ p: Argon2id.Parameters) throws(CustodyError) -> Double {
            let start = Clocks.monotonicNow()
            _ = try cryptoCall { () throws(CryptoError) in try Argon2id.deriveKey(password: password, salt: salt, parameters: p) }
            return max(Double(PresenceProof.nanoseconds(Clocks.monotonicNow() - start)), 1)
        }
        func parameters(work: Double) -> Argon2id.Parameters {
            var t = 3
            var m = Int(work / 3)
            if m < Argon2id.Parameters.minimumMemoryKiB { t = 2; m = Int(work / 2) }
            if m > calibrationMemoryCeilingKiB {
                m = calibrationMemoryCeilingKiB
                t = min(Argon2id.Parameters.maximumIterations, max(3, Int((work / Double(m)).rounded())))
            }
            m = max(Argon2id.Parameters.minimumMemoryKiB, (m / 1024) * 1024)
            while t * m > Argon2id.Parameters.maximumWorkKiB { t -= 1 }
            return (try? Argon2id.Parameters(iterations: max(t, Argon2id.Parameters.minimumIterations), memoryKiB: m)) ?? .minimum
        }
        var candidate = Argon2id.Parameters.minimum
        for _ in 0..<5 {
            let elapsed = try measure(candidate)
            let ratio = targetNs / elapsed
            if ratio >= 0.8 && ratio <= 1.25 { return candidate }
            if ratio < 1, candidate == .minimum { return candidate }
            let work = Double(candidate.iterations * candidate.memoryKiB) * min(max(ratio, 0.25), 8)
            let next = parameters(work: work)
            if next == candidate { return candidate }
            candidate = next
        }
        return candidate
    }
}

extension Custodian {
    func calibrated(_ given: Argon2id.Parameters?) throws(CustodyError) -> Argon2id.Parameters {
        if let given { return given }
        return try PassphraseKDF.calibrate()
    }

    /// Adds a passphrase slot, authorised by `current` (a secret that opens a slot now).
    public func addPassphraseSlot(_ passphrase: consuming SecretBytes, parameters: Argon2id.Parameters? = nil,
                                  label: String = "passphrase", current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        let master = try authorizedMaster(current, op: .slotAdd)
        let params = try calibrated(parameters)
        let info = try writeSlot(kind: .passphrase, label: label, master: master, fields: NewSlotFields(argon2: params), kekInput: passphrase)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    /// Replaces a passphrase slot with one for a new passphrase, authorised by `current` (for
    /// a passphrase change, normally the old passphrase): the new slot is written before the
    /// old one is deleted, so a crash in between leaves both usable, never neither.
    public func changePassphrase(slotID: String, to newPassphrase: consuming SecretBytes,
                                 parameters: Argon2id.Parameters? = nil, current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        guard let old = try loadSlots().first(where: { $0.id == slotID }) else { throw .slotNotFound(slotID) }
        guard old.header?.kind == .passphrase else { throw .invalidArgument("slot \(slotID) is not a passphrase slot") }
        let master = try authorizedMaster(current, op: .slotPassphraseChange)
        let params = try calibrated(parameters ?? old.header?.argon2)
        let info = try writeSlot(kind: .passphrase, label: old.header?.label ?? "passphrase", master: master,
                                 fields: NewSlotFields(argon2: params), kekInput: newPassphrase)
        try kr { () throws(KeyringError) in _ = try keyring.delete(item(.slot, slotID)) }
        try log(KeyUseContext(op: .slotPassphraseChange), key: info.id, result: "ok")
        return info
    }
}
