internal import SiteKeepJSON

/// The calling site's own key/value store (`localStorage` semantics), in its partition.
public protocol StorageService: Sendable {
    func value(forKey key: String, site: BridgeSite) async throws(BridgeFailure) -> String?
    /// - Throws: `quota_exceeded` when the site's quota would be passed.
    func setValue(_ value: String, forKey key: String, site: BridgeSite) async throws(BridgeFailure)
    func removeValue(forKey key: String, site: BridgeSite) async throws(BridgeFailure)
    func keys(site: BridgeSite) async throws(BridgeFailure) -> [String]
    func clear(site: BridgeSite) async throws(BridgeFailure)
}

/// `storage.*` handlers: each reads its validated args and calls one service method.
enum StorageOps {
    static let names: Set<String> = ["storage.get", "storage.set", "storage.remove", "storage.keys", "storage.clear"]

    static func handlers(_ s: any StorageService) -> [String: BridgeHandler] {
        [
            "storage.get": { c throws(BridgeFailure) in
                ["value": .string(try await s.value(forKey: try c.string("key"), site: c.site))]
            },
            "storage.set": { c throws(BridgeFailure) in
                try await s.setValue(try c.string("value"), forKey: try c.string("key"), site: c.site)
                return .object([])
            },
            "storage.remove": { c throws(BridgeFailure) in
                try await s.removeValue(forKey: try c.string("key"), site: c.site)
                return .object([])
            },
            "storage.keys": { c throws(BridgeFailure) in
                ["keys": .array(try await s.keys(site: c.site).map { .string($0) })]
            },
            "storage.clear": { c throws(BridgeFailure) in
                try await s.clear(site: c.site)
                return .object([])
            },
        ]
    }
}

/// The bridge module of the `storage.*` ops: the site's own key/value store.
public struct StorageModule: BridgeModule {
    public static let ops = StorageOps.names
    private let service: any StorageService
    public init(_ service: any StorageService) { self.service = service }
    public var handlers: [String: BridgeHandler] { StorageOps.handlers(service) }
}
