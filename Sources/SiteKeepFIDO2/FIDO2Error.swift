/// What went wrong with a FIDO2 security key. Each case's description says what to do; none
/// holds a PIN, a salt or an hmac-secret output.
public enum FIDO2Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// libfido2 (`libfido2.so.1`) is not installed or too old.
    case libraryMissing(String)
    /// No security key is plugged in.
    case noKey
    /// Several keys are plugged in and none was named.
    case severalKeys(paths: [String])
    /// Nothing answers at the key's path (unplugged, or no software authenticator's socket).
    case unreachable(String)
    /// The key has a PIN and none was given.
    case pinRequired
    /// The PIN was wrong; the key allows `retriesLeft` more tries (nil when it did not say).
    case pinWrong(retriesLeft: Int?)
    /// The key's PIN is blocked (no tries left): only a reset of the key clears it.
    case pinBlocked
    /// Too many wrong PINs in a row: the key takes no more until it is unplugged and plugged in.
    case pinBlockedUntilReplug
    /// A PIN was given but the key has none.
    case pinNotSet
    /// The new PIN breaks the key's rules (too short or too long).
    case pinPolicy(String)
    /// The key was not touched within the time-out.
    case noTouch
    /// The key lacks the `hmac-secret` extension (or made a credential without it).
    case noHMACSecret(String)
    /// The credential is not on this key (another key, or the key was reset).
    case credentialNotOnKey
    /// The key's answer was malformed: bad CBOR, wrong lengths, missing flags, a bad signature.
    case malformedReply(String)
    /// The caller passed something unusable.
    case invalidArgument(String)
    /// The key refused, or the operation was cancelled.
    case denied(String)
    /// Anything else libfido2 reported.
    case failed(String)

    public var description: String {
        switch self {
        case .libraryMissing(let why): return why
        case .noKey: return "no FIDO2 security key is plugged in; plug one in (or name one with \(FIDO2Key.environmentVariable))"
        case .severalKeys(let paths):
            return "\(paths.count) FIDO2 security keys are plugged in (\(paths.joined(separator: ", "))); keep one, or name one with \(FIDO2Key.environmentVariable)"
        case .unreachable(let why): return why
        case .pinRequired: return "the security key has a PIN: give it with --pin-file PATH or --pin"
        case .pinWrong(let left):
            if let left { return "wrong PIN for the security key; \(left) \(left == 1 ? "try" : "tries") left before it blocks" }
            return "wrong PIN for the security key"
        case .pinBlocked: return "the security key's PIN is blocked (no tries left); only a reset of the key clears it, which destroys its credentials"
        case .pinBlockedUntilReplug: return "too many wrong PINs in a row; unplug the security key and plug it in again"
        case .pinNotSet: return "a PIN was given but the security key has none"
        case .pinPolicy(let why): return "the security key refused the new PIN: \(why)"
        case .noTouch: return "the security key was not touched in time; touch it when it blinks"
        case .noHMACSecret(let why): return why
        case .credentialNotOnKey: return "the credential is not on this security key (another key, or the key was reset)"
        case .malformedReply(let why): return "the security key's answer is malformed: \(why)"
        case .invalidArgument(let why): return why
        case .denied(let why): return "the security key refused: \(why)"
        case .failed(let why): return why
        }
    }
}
