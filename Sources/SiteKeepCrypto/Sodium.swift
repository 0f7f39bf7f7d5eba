internal import CSodium
import Synchronization

/// libsodium's one-time initialisation.
///
/// `sodium_init()` is thread-safe and idempotent; ``ensureInitialized()`` calls it once per
/// process and remembers the outcome, so every primitive can call it cheaply.
public enum Sodium: Sendable {
    private static let state = Mutex<Int32?>(nil)

    /// Initialises libsodium if that has not happened yet.
    /// - Throws: ``CryptoError/libraryUnavailable(_:)`` if `sodium_init()` fails.
    public static func ensureInitialized() throws(CryptoError) {
        let rc: Int32 = state.withLock { value in
            if let value { return value }
            let rc = sodium_init()
            value = rc
            return rc
        }
        guard rc >= 0 else { throw .libraryUnavailable("sodium_init failed") }
    }

    /// The linked libsodium's version string, e.g. `1.0.18`.
    public static var versionString: String { String(cString: sodium_version_string()) }

    /// Whether libsodium's hardware AES-256-GCM is usable on this CPU (AES-NI and PCLMUL).
    /// Initialises libsodium first, because the answer is only known after `sodium_init()`.
    public static var hardwareAESGCMAvailable: Bool {
        (try? ensureInitialized()) != nil && crypto_aead_aes256gcm_is_available() == 1
    }
}
