// The vocabulary's names that need no Foundation (SiteID, KeyID, OpName, ItemKind,
// VocabularyError) live in SiteKeepNames, below it, so custody and the executables that must not
// load Foundation (sitekeep-read: DaemonClientTests) name sites, key ids, ops and item kinds
// without linking Origin's NFKC (SiteID's UUID side is here, in SiteIDUUID.swift).
// Every client of the vocabulary sees them here, as the crypto layer re-exports secure memory.
@_exported public import SiteKeepNames
