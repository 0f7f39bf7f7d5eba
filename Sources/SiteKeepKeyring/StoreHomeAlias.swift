// Where a store keeps its files: the one resolution rule lives in SiteKeepSystem (so the
// `sitekeep` daemon client, which links nothing with keys, resolves it the same way). The
// keyring and every layer above it name it as before, through this re-export.
@_exported public import struct SiteKeepSystem.StoreHome
@_exported public import struct SiteKeepSystem.StoreHomeError
