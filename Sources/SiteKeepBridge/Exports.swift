// The bridge's engine speaks its wire: whoever imports the engine (the daemon, the audit, tests)
// gets the messages, error codes and client of SiteKeepBridgeProtocol with it. A host that needs
// only the wire imports SiteKeepBridgeProtocol alone.
@_exported public import SiteKeepBridgeProtocol
