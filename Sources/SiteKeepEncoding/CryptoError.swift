/// The one error type of the crypto layer.
///
/// It lives in SiteKeepEncoding, below libsodium, because the encodings' decoders (``Base64``,
/// ``Hex``) throw it; SiteKeepSecureMemory and SiteKeepCrypto re-export it.
///
/// Descriptions name what was wrong and never contain key material, plaintext or
/// library-internal buffers. Authentication failure is deliberately a single opaque case:
/// a wrong key, a flipped tag byte and a truncated ciphertext all look the same to a caller.
public enum CryptoError: Error, Sendable, Equatable {
    /// libsodium (or OpenSSL) could not be initialised.
    case libraryUnavailable(String)
    /// Guarded memory could not be allocated (out of memory or out of memory mappings).
    case allocationFailed
    /// A key of the wrong length was given.
    case invalidKeyLength(expected: Int, actual: Int)
    /// A nonce of the wrong length was given.
    case invalidNonceLength(expected: Int, actual: Int)
    /// A salt of the wrong length was given.
    case invalidSaltLength(expected: Int, actual: Int)
    /// An input had a length the primitive cannot accept.
    case invalidLength(what: String, detail: String)
    /// A ciphertext, tag or MAC did not authenticate (wrong key, damaged or truncated input).
    case authenticationFailed
    /// KDF parameters outside the accepted range.
    case parametersOutOfRange(String)
    /// Key bytes that do not form a valid key (bad PEM, DER, curve point, ...).
    case invalidKeyEncoding(String)
    /// A signature encoding that cannot be parsed.
    case invalidSignatureEncoding(String)
    /// Text that is not valid hex, base64 or base64url.
    case invalidEncoding(String)
    /// Compressed data that cannot be inflated, or that inflates beyond its limit.
    case decompressionFailed(String)
    /// A primitive failed inside the library for a reason that is not the caller's input.
    case operationFailed(String)
}

extension CryptoError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .libraryUnavailable(let what):
            "cryptographic library unavailable: \(what); install it with tools/setup"
        case .allocationFailed:
            "could not allocate guarded memory for a secret (out of memory or memory mappings)"
        case let .invalidKeyLength(expected, actual):
            "key must be \(expected) bytes, got \(actual)"
        case let .invalidNonceLength(expected, actual):
            "nonce must be \(expected) bytes, got \(actual)"
        case let .invalidSaltLength(expected, actual):
            "salt must be \(expected) bytes, got \(actual)"
        case let .invalidLength(what, detail):
            "\(what) has an invalid length: \(detail)"
        case .authenticationFailed:
            "authentication failed (wrong key, or the data was changed or truncated)"
        case .parametersOutOfRange(let detail):
            "key-derivation parameters out of range: \(detail)"
        case .invalidKeyEncoding(let detail):
            "not a valid key: \(detail)"
        case .invalidSignatureEncoding(let detail):
            "not a valid signature encoding: \(detail)"
        case .invalidEncoding(let detail):
            "invalid encoding: \(detail)"
        case .decompressionFailed(let detail):
            "could not decompress: \(detail)"
        case .operationFailed(let detail):
            "cryptographic operation failed: \(detail)"
        }
    }
}
