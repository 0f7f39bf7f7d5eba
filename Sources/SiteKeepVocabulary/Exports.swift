// The vocabulary's names that need no Foundation (KeyID, OpName, ItemKind, VocabularyError) live
// in SiteKeepNames, below it, so custody and the executables that must not load Foundation
// (sitekeep-read: DaemonClientTests) name key ids and item kinds without linking Origin's NFKC.
// Every client of the vocabulary sees them here, as the crypto layer re-exports secure memory.
@_exported public import SiteKeepNames
