internal import CSodium

/// The operating system's CSPRNG, through libsodium (`randombytes_buf`, which uses `getrandom`).
public enum SecureRandom: Sendable {
    /// `count` random bytes. Use ``SecretBytes/init(randomCount:)`` for keys instead.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")   // programming error, never input
        try? Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { buffer in
            if let p = buffer.baseAddress { randombytes_buf(p, buffer.count) }
        }
        return out
    }

    /// A uniformly distributed integer in `0 ..< upperBound` (`randombytes_uniform`, no modulo bias).
    public static func uniform(_ upperBound: UInt32) -> UInt32 {
        try? Sodium.ensureInitialized()
        return randombytes_uniform(upperBound)
    }
}
