import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport

/// The dispatcher on the in-memory modules (every op but `sealed.*` configured, presence
/// approved), with team keys `team-ed` and `team-p256`, so `key.sign` reaches custody's handles.
let dispatcher: BridgeDispatcher? = {
    guard let signing = try? HandleSigningService.freshKeys() else { return nil }
    return try? InMemoryBridge.dispatcher(signing: signing)
}()

/// libFuzzer entry point. The first byte picks the connection's starting state (unbound, or bound
/// to one of the test sites); the rest is newline-separated request frames sent on that one
/// connection. Every frame must get exactly one well-formed reply (never an event, never a crash
/// or hang), and the connection's site must never change once bound.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBridge(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0, let dispatcher else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let connection = BridgeConnection()
    defer { dispatcher.disconnect(connection) }
    let sites = InMemoryBridge.sites.filter(\.isAppBound)
    let pick = Int(bytes[0] % UInt8(sites.count + 1))
    if pick > 0 {
        let hello = JSONSerializer.bytes(BridgeRequest(id: 0, op: "hello", args: ["origin": .string(sites[pick - 1].origins[0])]).json)
        _ = dispatcher.handleSynchronously(hello, connection: connection)
    }
    var bound = connection.site?.id
    for frame in bytes.dropFirst().split(separator: 0x0a, omittingEmptySubsequences: true).prefix(64) {
        let reply = dispatcher.handleSynchronously(Array(frame), connection: connection)
        guard let message = try? BridgeMessage.parse(reply) else { trap("unparseable reply") }
        if case .event = message { trap("an event where a reply was due") }
        if let was = bound, connection.site?.id != was { trap("a bound connection changed site") }
        bound = connection.site?.id
    }
    return 0
}

func trap(_ why: StaticString) -> Never {
    fatalError("FuzzBridge invariant broken: \(why)")
}
