internal import COpenSSL

/// PBKDF2 with HMAC-SHA256 (RFC 8018), through OpenSSL's `PKCS5_PBKDF2_HMAC`.
///
/// libsodium has no PBKDF2; OpenSSL's uses SHA-NI where the CPU has it, which makes it about
/// 1.5× faster than a loop over libsodium's portable SHA-256. The sgit vault format needs it
/// (600,000 iterations). The derived key goes straight into guarded memory.
public enum PBKDF2: Sendable {
    /// The iteration ceiling; more is refused as a denial-of-service guard.
    public static let maximumIterations = 10_000_000

    /// Derives a key from a secret password.
    /// - Throws: ``CryptoError/parametersOutOfRange(_:)`` for zero or too many iterations or
    ///   an output length outside 1...1024.
    public static func deriveKey(
        password: borrowing SecretBytes,
        salt: [UInt8],
        iterations: Int,
        outputByteCount: Int = 32
    ) throws(CryptoError) -> SecretBytes {
        try password.withUnsafeBytes { (pw: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try derive(password: pw, salt: salt, iterations: iterations, count: outputByteCount)
        }
    }

    static func derive(password: UnsafeRawBufferPointer, salt: [UInt8], iterations: Int, count: Int) throws(CryptoError) -> SecretBytes {
        guard iterations >= 1, iterations <= maximumIterations else {
            throw .parametersOutOfRange("PBKDF2 iterations must be 1...\(maximumIterations), got \(iterations)")
        }
        guard count >= 1, count <= 1024 else {
            throw .parametersOutOfRange("PBKDF2 output must be 1...1024 bytes, got \(count)")
        }
        return try SecretBytes(count: count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let pw = password.baseAddress?.assumingMemoryBound(to: CChar.self)
            let empty: [CChar] = [0]
            let rc = empty.withUnsafeBufferPointer { e in
                salt.withUnsafeBufferPointer { s in
                    PKCS5_PBKDF2_HMAC(pw ?? e.baseAddress, Int32(password.count),
                                      s.baseAddress ?? UnsafePointer(bitPattern: 1)!, Int32(s.count),
                                      Int32(iterations), EVP_sha256(), Int32(count),
                                      out.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            guard rc == 1 else { throw .operationFailed("PKCS5_PBKDF2_HMAC") }
        })
    }
}
