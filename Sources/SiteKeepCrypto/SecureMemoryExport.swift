/// Guarded memory (``SecretBytes``), libsodium's start and ``CryptoError`` live in
/// SiteKeepSecureMemory, below this layer, so the `sitekeep` front end can hold a secret
/// without loading OpenSSL (BENCHMARKS.md, "The one-shot start-up"). Every client of the
/// crypto layer sees them here as before.
@_exported public import SiteKeepSecureMemory
