import SiteKeepNames

// What the bytes a team key is asked to sign are, for custody's one gate (`Custodian+Gate.swift`),
// which applies the key's policy to them.

/// What a team key is asked to sign, read from the bytes themselves: the signing gate's policy
/// check depends on what the data *is*, never on what the caller says it is, so a raw
/// `team sign` or `key.sign` of an SSH login request is treated as the login it would be.
///
/// The reading is deliberately loose (a prefix, not a full parse): anything that starts as an
/// SSH user-authentication request or an SSHSIG blob is treated as one, since a signature over
/// such bytes is what an SSH server or `ssh-keygen -Y verify` would accept.
public enum SignedDataKind: Sendable, Equatable {
    /// An RFC 4252 §7 public-key user-authentication request: `string session-id` (1 to 256
    /// bytes), then `SSH_MSG_USERAUTH_REQUEST` (50). A signature over it logs in somewhere.
    case sshLogin
    /// An SSHSIG signed-data blob (`"SSHSIG"` magic, then the namespace); the namespace is
    /// nil when the blob is too short or malformed to name one.
    case sshsig(namespace: String?)
    /// Anything else.
    case other

    /// The kind of `data`.
    public init(_ data: [UInt8]) {
        if data.count >= 6, data[0..<6].elementsEqual("SSHSIG".utf8) {
            self = .sshsig(namespace: Self.sshString(data, at: 6).flatMap { String(validating: $0, as: UTF8.self) })
            return
        }
        if data.count >= 5 {
            let n = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
            if (1...256).contains(n), data.count > 4 + n, data[4 + n] == 50 {
                self = .sshLogin
                return
            }
        }
        self = .other
    }

    /// The SSH `string` at `offset`, or nil when it does not fit.
    private static func sshString(_ data: [UInt8], at offset: Int) -> ArraySlice<UInt8>? {
        guard data.count >= offset + 4 else { return nil }
        let n = Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8 | Int(data[offset + 3])
        guard n <= data.count - offset - 4 else { return nil }
        return data[(offset + 4)..<(offset + 4 + n)]
    }
}
