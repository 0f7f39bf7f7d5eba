// Key ids are named in SiteKeepNames (the Foundation-free part of SiteKeepVocabulary), below custody
// (as item kinds are: ItemKinds.swift). Custody's
// clients that name a key id through custody (the bridge's dispatcher) see `KeyID` here as
// before, through this re-export, as the keyring re-exports `StoreHome`; a file that imports
// the vocabulary itself needs none of it.
@_exported public import struct SiteKeepNames.KeyID
