public import SiteKeepTPM
import SiteKeepFIDO2
import SiteKeepSystem

/// A device setting as the store keeps it (`config set tpm-tcti …`, `config set fido2-device …`):
/// its value, custody's record tag over it, and the bytes that tag covers. Custody reads these
/// at each use (``CustodianConfiguration/deviceSettings``), so a change applies at once in the
/// daemon and in a command's own process alike.
public struct TaggedDeviceSetting: Sendable, Equatable {
    /// The value (a tpm2-tss TCTI string, or a FIDO2 device path).
    public let value: String
    /// Custody's record tag (``RecordTagPurpose/daemonSetting``) over ``taggedBytes``.
    public let tag: [UInt8]
    /// What the tag covers (the settings file's domain label, key and value).
    public let taggedBytes: [UInt8]

    /// A setting with its tag.
    public init(value: String, tag: [UInt8], taggedBytes: [UInt8]) {
        self.value = value
        self.tag = tag
        self.taggedBytes = taggedBytes
    }
}

/// The device settings the store keeps; nil: not set (the environment variable, else the default).
public struct DeviceSettings: Sendable, Equatable {
    /// Where TPM 2.0 slots reach the TPM (`tpm-tcti`).
    public var tpmTCTI: TaggedDeviceSetting?
    /// The FIDO2 security key to use (`fido2-device`).
    public var fido2Device: TaggedDeviceSetting?

    /// No device setting stored.
    public init(tpmTCTI: TaggedDeviceSetting? = nil, fido2Device: TaggedDeviceSetting? = nil) {
        self.tpmTCTI = tpmTCTI
        self.fido2Device = fido2Device
    }
}

extension Custodian {
    /// Where TPM slots reach the TPM now: the configuration's own connection (tests, bench),
    /// else `SITEKEEP_TPM_TCTI` in this process's environment (an override for this run), else
    /// the stored `tpm-tcti` setting (``trusted(_:)``), else `device:/dev/tpmrm0`.
    public var tpmConnection: TPMConnection {
        if let c = configuration.tpmConnection { return c }
        if let v = ProcessEnvironment.current()[TPMConnection.environmentVariable], !v.isEmpty { return TPMConnection(tcti: v) }
        if let s = trusted(configuration.deviceSettings().tpmTCTI) { return TPMConnection(tcti: s) }
        return TPMConnection(tcti: TPMConnection.defaultTCTI)
    }

    /// The stored `fido2-device` setting when it applies (``trusted(_:)``); nil: the environment's
    /// or the plugged key.
    var fido2DeviceSetting: FIDO2Key? {
        trusted(configuration.deviceSettings().fido2Device).map { FIDO2Key(path: $0) }
    }

    /// A stored device setting's value when it may be used: it carries a tag, and, while
    /// unlocked, the tag verifies under the master key. While locked no tag can be checked and
    /// the value is used for the unlock itself: a device that is not the one a slot was made
    /// with cannot open it (the TPM's sealed object, the key's PRF output), so a successful
    /// unlock proves the device; after it, a value whose tag does not verify is ignored.
    func trusted(_ setting: TaggedDeviceSetting?) -> String? {
        guard let setting, !setting.tag.isEmpty else { return nil }
        guard isUnlocked else { return setting.value }
        return (try? isValidRecordTag(setting.tag, for: setting.taggedBytes, purpose: .daemonSetting)) == true ? setting.value : nil
    }
}
