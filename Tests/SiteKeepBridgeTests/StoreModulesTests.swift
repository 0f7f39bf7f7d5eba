import Testing
import SiteKeepBridge
import SiteKeepWiring

/// The one list of module kinds (``BridgeModules/shipped``) is what a store serves: each kind is
/// either made by SiteKeepWiring's `StoreModule` conformance or named unwired on purpose.
@Suite struct StoreModulesTests {
    @Test func everyShippedKindIsWiredOrDeliberatelyUnwired() {
        let unwired = Set(StoreModules.unwired.map { ObjectIdentifier($0) })
        for kind in BridgeModules.shipped {
            let wired = kind is any StoreModule.Type
            #expect(wired != unwired.contains(ObjectIdentifier(kind)), "\(kind): wired \(wired), listed unwired \(unwired.contains(ObjectIdentifier(kind)))")
        }
    }

    @Test func theShippedKindsServeEveryCatalogueRequestOnce() throws {
        var seen: [String: String] = [:]
        for kind in BridgeModules.shipped {
            for op in kind.ops {
                #expect(seen.updateValue("\(kind)", forKey: op) == nil, "\(op) is in two modules")
            }
        }
        let catalogue = try OpCatalogue.bundled()
        for op in catalogue.ops where op.direction == .request && op.name != "hello" && op.unsupportedMessage == nil {
            #expect(seen[op.name] != nil, "no shipped module serves \(op.name)")
        }
    }
}
