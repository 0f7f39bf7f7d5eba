internal import CSodium
import Synchronization

/// libsodium's one-time initialisation.
///
/// `sodium_init()` is thread-safe and idempotent; ``ensureInitialized()`` calls it once per
/// process and remembers the outcome, so every primitive can call it cheaply.
public enum Sodium: Sendable {
    /// Set once `sodium_init()` has succeeded: every later call is one atomic load (this runs
    /// before every primitive, on every thread; a lock here was contended under load).
    private static let initialized = Atomic<Bool>(false)

    /// Initialises libsodium if that has not happened yet.
    /// - Throws: ``CryptoError/libraryUnavailable(_:)`` if `sodium_init()` fails.
    public static func ensureInitialized() throws(CryptoError) {
        if initialized.load(ordering: .acquiring) { return }
        // Thread-safe and idempotent (1 when already done), so racing first callers are fine.
        guard sodium_init() >= 0 else { throw .libraryUnavailable("sodium_init failed") }
        initialized.store(true, ordering: .releasing)
    }

    /// The linked libsodium's version string, e.g. `1.0.18`.
    public static var versionString: String { String(cString: sodium_version_string()) }

    /// Whether libsodium's hardware AES-256-GCM is usable on this CPU (AES-NI and PCLMUL).
    /// Initialises libsodium first, because the answer is only known after `sodium_init()`.
    public static var hardwareAESGCMAvailable: Bool {
        (try? ensureInitialized()) != nil && crypto_aead_aes256gcm_is_available() == 1
    }
}
