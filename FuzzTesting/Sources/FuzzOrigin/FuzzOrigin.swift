import SiteKeepVocabulary

/// libFuzzer entry point: `Origin(parsing:)` on any text. It must return or throw an
/// `OriginError`, never crash; what parses must be canonical (its serialisation parses back to
/// the same origin and serialises the same), and errors never grow past a bounded size.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOrigin(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        let origin = try Origin(parsing: text)
        let again: Origin
        do { again = try Origin(parsing: origin.serialized) } catch { trap("a canonical origin does not parse again") }
        guard again == origin, again.serialized == origin.serialized else { trap("canonical form not stable") }
        guard origin.port != 0 else { trap("port 0 accepted") }
        guard origin.serialized.utf8.count <= Origin.maximumLength * 4 else { trap("serialisation too long") }
    } catch {
        // The description is shown to people: bounded, whatever the input.
        guard "\(error)".utf8.count <= 4 * Origin.maximumLength + 512 else { trap("error message unbounded") }
    }
    return 0
}

/// A broken invariant: stop so libFuzzer records the input.
func trap(_ what: StaticString) -> Never {
    fatalError("FuzzOrigin invariant broken: \(what)")
}
