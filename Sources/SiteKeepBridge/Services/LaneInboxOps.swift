internal import SiteKeepJSON

/// One unread message an agent sent to the append lane of one of the calling site's vaults, as
/// `inbox.list` shows it: what it is, never its body (``LaneInboxService/messages(vault:site:)``
/// reads no body into the reply), never a token or key.
public struct BridgeLaneMessage: Sendable, Equatable {
    /// How SiteKeep read it: sealed to the vault's lane key and opened; plain JSON (the web
    /// client's apps, unsealed); or opaque (only its size is known).
    public enum Kind: String, Sendable, Equatable { case sealed, plain, opaque }
    public var vault: String
    /// The server's id (`<13 digits>_<24 hex>.enc`), as `inbox.mark` takes it.
    public var id: String
    public var receivedMs: Int64
    /// The label of the token it came through, or "unknown token".
    public var sender: String
    public var title: String?
    public var kind: Kind
    public var size: Int
    public init(vault: String, id: String, receivedMs: Int64, sender: String, title: String?, kind: Kind, size: Int) {
        self.vault = vault
        self.id = id
        self.receivedMs = receivedMs
        self.sender = sender
        self.title = title
        self.kind = kind
        self.size = size
    }

    var json: JSONValue {
        ["vault": .string(vault), "id": .string(id), "received_ms": .int(receivedMs), "sender": .string(sender),
         "title": title.map { .string($0) } ?? .null, "kind": .string(kind.rawValue), "size": .integer(size)]
    }
}

/// The append lanes of the calling site's own vaults (issue 48): what agents sent, read with
/// the vaults' keys in custody, and marked read on the server (`mark-processed`, so the web
/// client agrees). A vault of another site, or of none, is refused as the vault ops refuse it
/// (`not_found`, naming nothing).
public protocol LaneInboxService: Sendable {
    /// The unread messages of `vault`'s lane (nil: every lane of the site's vaults), oldest first.
    func messages(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeLaneMessage]
    /// Checks that every id is an unread message of the site's lanes (else ``BridgeFailure/notInInbox(_:)``,
    /// nothing marked). - Returns: a marking to run once every other check of the call passed.
    func prepareMark(_ ids: [String], site: BridgeSite) async throws(BridgeFailure) -> LaneMarking
}

/// Marks checked by ``LaneInboxService/prepareMark(_:site:)``, run by `inbox.mark` after its
/// paths were checked too, so a bad path marks no message and a bad id no path.
public struct LaneMarking: Sendable {
    public let count: Int
    private let run: @Sendable () async throws(BridgeFailure) -> Int
    public init(count: Int, run: @escaping @Sendable () async throws(BridgeFailure) -> Int) {
        self.count = count
        self.run = run
    }
    /// Marks them. - Returns: how many the server moved.
    public func callAsFunction() async throws(BridgeFailure) -> Int { try await run() }
}
