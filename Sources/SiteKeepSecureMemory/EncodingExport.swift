/// Base64, Hex and ``CryptoError`` live in SiteKeepEncoding, below this layer (pure Swift, so
/// the bridge and the ssh-agent protocol use them without linking libsodium). Every client of
/// guarded memory, and of the crypto layer, which re-exports this one, sees them here as before.
@_exported public import SiteKeepEncoding
