internal import CSodium

/// Argon2id (RFC 9106) through libsodium's `crypto_pwhash` (parallelism 1, version 0x13).
public enum Argon2id: Sendable {
    /// The salt length libsodium requires, 16.
    public static let saltByteCount = 16

    /// Cost parameters, validated on construction.
    ///
    /// The floor is OWASP's minimum for Argon2id (t = 2, m = 19 MiB). The ceiling (t ≤ 10,
    /// m ≤ 1 GiB, and t × m ≤ 4 GiB-passes) bounds what a hostile or damaged slot header can
    /// make an unlock cost: at most a few seconds and a gibibyte here, never hours or all memory.
    public struct Parameters: Sendable, Equatable, Hashable, CustomStringConvertible {
        /// Passes over memory (libsodium's `opslimit`).
        public let iterations: Int
        /// Memory in KiB (libsodium's `memlimit` / 1024).
        public let memoryKiB: Int

        /// The lowest accepted iterations.
        public static let minimumIterations = 2
        /// The lowest accepted memory, 19 MiB.
        public static let minimumMemoryKiB = 19 * 1024
        /// The highest accepted iterations.
        public static let maximumIterations = 10
        /// The highest accepted memory, 1 GiB.
        public static let maximumMemoryKiB = 1024 * 1024
        /// The highest accepted product of iterations and memory (KiB), 4 GiB-passes.
        public static let maximumWorkKiB = 4 * 1024 * 1024

        /// The minimum parameters (t = 2, m = 19 MiB).
        public static let minimum = try! Parameters(iterations: minimumIterations, memoryKiB: minimumMemoryKiB)

        /// Validates and stores parameters.
        /// - Throws: ``CryptoError/parametersOutOfRange(_:)`` naming the bound that was crossed.
        public init(iterations: Int, memoryKiB: Int) throws(CryptoError) {
            guard iterations >= Self.minimumIterations else {
                throw .parametersOutOfRange("Argon2id iterations \(iterations) below the minimum \(Self.minimumIterations)")
            }
            guard memoryKiB >= Self.minimumMemoryKiB else {
                throw .parametersOutOfRange("Argon2id memory \(memoryKiB) KiB below the minimum \(Self.minimumMemoryKiB) KiB")
            }
            guard iterations <= Self.maximumIterations else {
                throw .parametersOutOfRange("Argon2id iterations \(iterations) above the ceiling \(Self.maximumIterations)")
            }
            guard memoryKiB <= Self.maximumMemoryKiB else {
                throw .parametersOutOfRange("Argon2id memory \(memoryKiB) KiB above the ceiling \(Self.maximumMemoryKiB) KiB")
            }
            guard iterations * memoryKiB <= Self.maximumWorkKiB else {
                throw .parametersOutOfRange("Argon2id work \(iterations) × \(memoryKiB) KiB above the ceiling \(Self.maximumWorkKiB) KiB-passes")
            }
            self.iterations = iterations
            self.memoryKiB = memoryKiB
        }

        public var description: String { "Argon2id(t=\(iterations), m=\(memoryKiB) KiB, p=1)" }
    }

    /// Derives a key from a password into guarded memory.
    ///
    /// - Parameters:
    ///   - password: The passphrase bytes (may be empty).
    ///   - salt: Exactly ``saltByteCount`` bytes.
    ///   - parameters: Validated cost parameters.
    ///   - outputByteCount: 16...1024.
    /// - Throws: ``CryptoError/invalidSaltLength(expected:actual:)``,
    ///   ``CryptoError/parametersOutOfRange(_:)``, or ``CryptoError/operationFailed(_:)`` when
    ///   libsodium cannot allocate the memory.
    public static func deriveKey(
        password: borrowing SecretBytes,
        salt: [UInt8],
        parameters: Parameters,
        outputByteCount: Int = 32
    ) throws(CryptoError) -> SecretBytes {
        try password.withUnsafeBytes { (pw: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try derive(password: pw, salt: salt, parameters: parameters, count: outputByteCount)
        }
    }

    package static func derive(password: UnsafeRawBufferPointer, salt: [UInt8], parameters: Parameters, count: Int) throws(CryptoError) -> SecretBytes {
        guard salt.count == saltByteCount else { throw .invalidSaltLength(expected: saltByteCount, actual: salt.count) }
        guard count >= 16, count <= 1024 else {
            throw .parametersOutOfRange("Argon2id output must be 16...1024 bytes, got \(count)")
        }
        return try SecretBytes(count: count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let empty: [CChar] = [0]
            let rc = empty.withUnsafeBufferPointer { e in
                crypto_pwhash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(count),
                              password.baseAddress?.assumingMemoryBound(to: CChar.self) ?? e.baseAddress!,
                              UInt64(password.count), salt,
                              UInt64(parameters.iterations), parameters.memoryKiB * 1024,
                              crypto_pwhash_ALG_ARGON2ID13)
            }
            guard rc == 0 else { throw .operationFailed("crypto_pwhash could not allocate \(parameters.memoryKiB) KiB") }
        })
    }
}
