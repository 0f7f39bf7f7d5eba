internal import CSodium

/// A secret in guarded memory.
///
/// The bytes live in a `sodium_malloc` region (guard pages before and after, a canary, and
/// `mlock` where the limit allows) that is `PROT_NONE` except inside a ``withUnsafeBytes(_:)``
/// scope. The type is noncopyable, so a secret has exactly one owner; it cannot be printed,
/// logged, encoded, compared with `==` or put into an array of `Any`. When its owner goes out of
/// scope, `sodium_free` zeroes the region, checks the canary and unmaps it.
///
/// Access to the bytes is `package`: code outside SiteKeep's own modules cannot read them.
/// Inside SiteKeep, only the crypto, keyring and custody layers use it.
///
/// - Warning: Reserve `SecretBytes` for keys and other long-lived secrets. Every instance
///   costs several memory mappings, and a process can hold only about 16,000 at once.
@safe public struct SecretBytes: ~Copyable {
    private let base: UnsafeMutableRawPointer
    /// The number of secret bytes.
    public let count: Int
    /// Whether the pages stay read-only between uses (see ``pinReadOnly()``).
    private var pinned = false

    /// Allocates `count` guarded bytes filled by `body`, which runs with write access.
    ///
    /// The region is locked down before this returns, including when `body` throws.
    package init(
        count: Int,
        initializingWith body: (UnsafeMutableRawBufferPointer) throws(CryptoError) -> Void
    ) throws(CryptoError) {
        try Sodium.ensureInitialized()
        guard count > 0 else { throw .invalidLength(what: "secret", detail: "must not be empty") }
        guard let p = sodium_malloc(count) else { throw .allocationFailed }
        do {
            try body(UnsafeMutableRawBufferPointer(start: p, count: count))
        } catch {
            sodium_free(p)
            throw error
        }
        sodium_mprotect_noaccess(p)
        base = p
        self.count = count
    }

    /// Allocates `count` bytes from the operating system's CSPRNG (`randombytes_buf`).
    /// - Throws: ``CryptoError/allocationFailed`` when guarded memory is exhausted.
    public init(randomCount count: Int) throws(CryptoError) {
        try self.init(count: count, initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            randombytes_buf(buffer.baseAddress!, buffer.count)
        })
    }

    /// Copies `bytes` into guarded memory.
    ///
    /// The source is not wiped: zero it yourself (``SecureMemory/zero(_:)``) if it held a secret.
    public init(copying bytes: some Collection<UInt8>) throws(CryptoError) {
        // Copy straight into guarded memory: no intermediate array holding the secret.
        let count = bytes.count
        try self.init(count: count, initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var i = 0
            for b in bytes where i < count {
                buffer[i] = b
                i += 1
            }
        })
    }

    /// Moves the bytes of `bytes` into guarded memory and zeroes the array.
    public init(consumingAndZeroing bytes: inout [UInt8]) throws(CryptoError) {
        defer { SecureMemory.zero(&bytes) }
        let source = bytes
        try self.init(count: source.count, initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            buffer.copyBytes(from: source)
        })
        var scratch = source
        SecureMemory.zero(&scratch)
    }

    /// Runs `body` with read access to the secret bytes.
    ///
    /// The region is readable only for the duration of the call; do not let the pointer escape.
    /// `SecretBytes` is not `Sendable`: mprotect state is per page, so two threads reading the
    /// same secret would race. Share a secret through a `Mutex` or an actor.
    package borrowing func withUnsafeBytes<R: ~Copyable, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        if pinned { return try body(UnsafeRawBufferPointer(start: base, count: count)) }
        sodium_mprotect_readonly(base)
        defer { sodium_mprotect_noaccess(base) }
        return try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Leaves the pages read-only (instead of `PROT_NONE`) until the secret is released.
    ///
    /// For hot keys only (a signing key used thousands of times a second): each use then
    /// costs no `mprotect` pair (about 1.7 µs here, 10% of an Ed25519 signature). The guard
    /// pages, the canary, `mlock` and the wipe on release all stay; writes still fault. What is
    /// given up is the fault on a stray *read* between uses.
    package mutating func pinReadOnly() {
        guard !pinned else { return }
        sodium_mprotect_readonly(base)
        pinned = true
    }

    /// Returns a new guarded copy of this secret.
    public borrowing func duplicate() throws(CryptoError) -> SecretBytes {
        try withUnsafeBytes { (src: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try SecretBytes(count: src.count, initializingWith: { (dst: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                dst.copyMemory(from: src)
            })
        }
    }

    /// Compares two secrets in constant time (`sodium_memcmp`). Secrets of different lengths
    /// are unequal; the length itself is not secret.
    public borrowing func constantTimeEquals(_ other: borrowing SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
    }

    /// Compares the secret with public bytes in constant time.
    public borrowing func constantTimeEquals(_ bytes: [UInt8]) -> Bool {
        guard count == bytes.count else { return false }
        return withUnsafeBytes { a in
            bytes.withUnsafeBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
    }

    deinit {
        // sodium_free makes the region writable, zeroes it, checks the canary and unmaps it.
        sodium_free(base)
    }
}

@available(*, unavailable, message: "SecretBytes toggles page protection; share it through a Mutex or an actor")
extension SecretBytes: Sendable {}

/// Wiping of ordinary (non-guarded) buffers that held something sensitive.
public enum SecureMemory: Sendable {
    /// Overwrites every byte of `bytes` with zero (`sodium_memzero`, which the compiler cannot
    /// elide), keeping its count.
    public static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let p = buffer.baseAddress { sodium_memzero(p, buffer.count) }
        }
    }

    /// Overwrites a raw buffer with zeros.
    package static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        if let p = buffer.baseAddress { sodium_memzero(p, buffer.count) }
    }
}

/// Constant-time comparison of public-length byte strings (tags, MACs, hashes).
public enum ConstantTime: Sendable {
    /// Whether `a` and `b` are equal, compared with `sodium_memcmp` so the time taken does not
    /// depend on where they first differ. Different lengths compare unequal immediately.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in sodium_memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0 }
        }
    }
}
