internal import COpenSSL

/// OpenSSL's secure heap (`CRYPTO_secure_malloc_init`): mlocked, guard-paged memory that
/// OpenSSL uses for private-key big numbers once it is initialised.
public enum OpenSSLSecureHeap: Sendable {
    /// Initialises a 256 KiB secure heap; returns whether it is in use. Idempotent.
    @discardableResult
    public static func initialize() -> Bool {
        if CRYPTO_secure_malloc_initialized() == 1 { return true }
        return CRYPTO_secure_malloc_init(256 * 1024, 32) != 0
    }

    /// Whether the secure heap is in use.
    public static var isInitialized: Bool { CRYPTO_secure_malloc_initialized() == 1 }

    /// The linked OpenSSL version text, e.g. `OpenSSL 3.0.19 ...`.
    public static var versionString: String { String(cString: OpenSSL_version(0)) }
}

/// Version facts about the linked C libraries, for `sitekeep doctor`.
public enum LibraryVersions: Sendable {
    /// `name: version` pairs for libsodium, OpenSSL and zlib.
    public static var all: [(name: String, version: String)] {
        [("libsodium", Sodium.versionString), ("OpenSSL libcrypto", OpenSSLSecureHeap.versionString), ("zlib", Zlib.versionString)]
    }
}
