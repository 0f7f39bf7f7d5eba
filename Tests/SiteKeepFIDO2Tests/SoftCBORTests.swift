import Testing
import SiteKeepSoftFIDO2

private func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

/// The software authenticator's CBOR codec: RFC 8949 Appendix A's vectors, CTAP2's canonical
/// map order, and refusal of what CTAP2 never sends.
struct SoftCBORTests {
    static let vectors: [(CBOR, String)] = [
        (.int(0), "00"), (.int(23), "17"), (.int(24), "1818"), (.int(100), "1864"), (.int(1000), "1903e8"),
        (.int(1_000_000), "1a000f4240"), (.int(1_000_000_000_000), "1b000000e8d4a51000"),
        (.int(-1), "20"), (.int(-10), "29"), (.int(-100), "3863"), (.int(-1000), "3903e7"),
        (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"), (.text("a"), "6161"), (.text("IETF"), "6449455446"),
        (.text("ü"), "62c3bc"), (.array([]), "80"), (.array([.int(1), .int(2), .int(3)]), "83010203"),
        (.map([]), "a0"), (.map([.init(.int(1), .int(2)), .init(.int(3), .int(4))]), "a201020304"),
        (.map([.init(.text("a"), .int(1)), .init(.text("b"), .array([.int(2), .int(3)]))]), "a26161016162820203"),
        (.bool(false), "f4"), (.bool(true), "f5"), (.null, "f6"),
    ]

    @Test func rfc8949VectorsEncodeAndDecode() throws {
        for (item, expected) in Self.vectors {
            #expect(item.encoded == hex(expected), "\(item)")
            #expect(try CBOR.decode(hex(expected)) == item, "\(expected)")
        }
    }

    @Test func mapsAreWrittenInCTAP2CanonicalOrder() throws {
        // Shorter encoded keys first, then bytewise: 3 (03), -1 (20), "b" (6162), "aa" (626161).
        let map = CBOR.map([.init(.text("aa"), .int(1)), .init(.text("b"), .int(2)), .init(.int(-1), .int(3)), .init(.int(3), .int(4))])
        #expect(map.encoded == hex("a4" + "0304" + "2003" + "616202" + "62616101"))
        // A COSE key: 1, 3, -1, -2, -3.
        let cose = CBOR.map([.init(.int(-3), .int(0)), .init(.int(-2), .int(0)), .init(.int(-1), .int(1)), .init(.int(3), .int(-7)), .init(.int(1), .int(2))])
        #expect(cose.encoded == hex("a5" + "0102" + "0326" + "2001" + "2100" + "2200"))
    }

    @Test func whatCTAP2NeverSendsIsRefused() {
        let cases: [(String, CBOR.DecodeError)] = [
            ("440102", .truncated), ("0000", .trailingBytes), ("5f", .unsupported("indefinite length or reserved additional information 31")),
            ("c000", .unsupported("tag")), ("a201020103", .duplicateKey), ("61ff", .invalidText),
            ("9bffffffffffffffff", .truncated), ("5bffffffffffffffff", .truncated), ("", .truncated),
        ]
        for (input, error) in cases {
            #expect(throws: error, "\(input)") { _ = try CBOR.decode(hex(input)) }
        }
        #expect(throws: CBOR.DecodeError.tooDeep) { _ = try CBOR.decode(hex("818181818181818181818100"), maxDepth: 8) }
        #expect { _ = try CBOR.decode(hex("f90000")) } throws: { ($0 as? CBOR.DecodeError).map { if case .unsupported = $0 { true } else { false } } ?? false }
    }
}
