/// Guarded memory (``SecretBytes``) and libsodium's start live in SiteKeepSecureMemory, below
/// this layer, so the `sitekeep` front end can hold a secret without loading OpenSSL
/// (BENCHMARKS.md, "The one-shot start-up"); ``CryptoError``, Base64 and Hex in
/// SiteKeepEncoding, below that, which SiteKeepSecureMemory re-exports. Every client of the
/// crypto layer sees them here as before.
@_exported public import SiteKeepSecureMemory
