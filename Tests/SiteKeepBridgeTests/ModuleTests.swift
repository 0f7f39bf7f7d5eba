import Testing
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport

/// The bridge's op groups as modules (issue 13, item 2): a dispatcher serves the ops of the
/// modules it is given and no others, and the catalogue check still holds.
@Suite struct BridgeModuleTests {
    /// Every in-memory module but storage.
    static var withoutStorage: [any BridgeModule] { InMemoryBridge.modules().filter { !($0 is StorageModule) } }

    static func hello(_ d: BridgeDispatcher) async -> BridgeConnection {
        let c = BridgeConnection()
        _ = await d.handle(Array(#"{"v":1,"id":1,"op":"hello","args":{"origin":"https://reader.example"}}"#.utf8), connection: c)
        return c
    }

    static func send(_ d: BridgeDispatcher, _ c: BridgeConnection, _ op: String, _ args: JSONValue) async -> BridgeMessage {
        await d.reply(to: JSONSerializer.bytes(BridgeRequest(id: "m", op: op, args: args).json), connection: c)
    }

    @Test func aModulesOpsAreServedOnlyWhenTheModuleIsRegistered() async throws {
        let without = try BridgeDispatcher(catalogue: .bundled(), sites: InMemoryBridge.resolver, modules: Self.withoutStorage)
        #expect(without.servedOps.isDisjoint(with: StorageModule.ops))
        let c = await Self.hello(without)
        for op in StorageModule.ops.sorted() {
            let args: JSONValue = op == "storage.set" ? ["key": "k", "value": "v"] : op == "storage.keys" || op == "storage.clear" ? .object([]) : ["key": "k"]
            #expect(code(await Self.send(without, c, op, args)) == .notConfigured, "\(op)")
        }

        let with = try BridgeDispatcher(catalogue: .bundled(), sites: InMemoryBridge.resolver,
                                        modules: Self.withoutStorage + [StorageModule(InMemoryStorage())])
        #expect(StorageModule.ops.isSubset(of: with.servedOps))
        #expect(with.servedOps.subtracting(StorageModule.ops) == without.servedOps)
        let w = await Self.hello(with)
        #expect(result(await Self.send(with, w, "storage.set", ["key": "k", "value": "v"])) != nil)
        #expect(result(await Self.send(with, w, "storage.get", ["key": "k"]))?["value"] == "v")
    }

    struct Echo: BridgeModule {
        static let ops: Set<String> = ["echo.say"]
        var handlers: [String: BridgeHandler] { ["echo.say": { _ throws(BridgeFailure) in .object([]) }] }
    }
    struct Doubled: BridgeModule {
        static let ops: Set<String> = ["storage.get"]
        var handlers: [String: BridgeHandler] { ["storage.get": { _ throws(BridgeFailure) in .object([]) }] }
    }

    @Test func theCatalogueCheckStillFails() throws {
        let bundled = try OpCatalogue.bundled()
        // A module serving an op the catalogue does not list.
        #expect(throws: BridgeError.self) {
            try BridgeDispatcher(catalogue: bundled, sites: InMemoryBridge.resolver, modules: [Echo()])
        }
        // A catalogued op no known module can serve.
        #expect(throws: BridgeError.self) {
            try BridgeDispatcher(catalogue: bundled, sites: InMemoryBridge.resolver, modules: [],
                                 knownModules: BridgeModules.shipped.filter { ObjectIdentifier($0) != ObjectIdentifier(StorageModule.self) })
        }
        // Two registered modules serving one op.
        #expect(throws: BridgeError.self) {
            try BridgeDispatcher(catalogue: bundled, sites: InMemoryBridge.resolver, modules: [StorageModule(InMemoryStorage()), Doubled()])
        }
        // Every shipped kind, none registered: the catalogue and the kinds agree.
        let empty = try BridgeDispatcher(catalogue: bundled, sites: InMemoryBridge.resolver, modules: [])
        #expect(empty.servedOps.isEmpty)
    }

    @Test func aModuleWhoseHandlersDifferFromItsDeclaredOpsIsRefused() throws {
        struct Partial: BridgeModule {
            static let ops: Set<String> = ["storage.get", "storage.set"]
            var handlers: [String: BridgeHandler] { ["storage.get": { _ throws(BridgeFailure) in .object([]) }] }
        }
        #expect(throws: BridgeError.self) {
            try BridgeDispatcher(catalogue: .bundled(), sites: InMemoryBridge.resolver, modules: [Partial()])
        }
    }
}
