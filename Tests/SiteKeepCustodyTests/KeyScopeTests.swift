import Foundation
import Testing
import SiteKeepCrypto
@testable import SiteKeepCustody

/// A key scope does what its handle does: the array and the caller-memory forms agree with
/// the handle's own seal, open and MAC, and a scope over two handles seals with the first and
/// hashes with the second.
@Suite struct KeyScopeTests {
    let message = Array("len-prefixed ‖ name".utf8)
    let plaintext = Array("a value".utf8)
    let ad = Array("SKP1 associated data".utf8)

    @Test func scopeMatchesTheHandle() throws {
        let h = try SymmetricKeyHandle.random()
        let (mac, sealed) = try h.withScope { (s: borrowing KeyScope) throws(CryptoError) -> ([UInt8], [UInt8]) in
            (s.authenticationCode(for: message), try s.seal(plaintext, authenticating: ad))
        }
        #expect(mac == h.authenticationCode(for: message))
        #expect(try h.open(sealed, authenticating: ad) == plaintext)
    }

    @Test func scopeOverTwoHandlesSealsWithOneAndHashesWithTheOther() throws {
        let storage = try SymmetricKeyHandle.random()
        let row = try SymmetricKeyHandle.random()
        let (mac, sealed) = try storage.withScope(macKey: row) { (s: borrowing KeyScope) throws(CryptoError) -> ([UInt8], [UInt8]) in
            (s.authenticationCode(for: message), try s.seal(plaintext, authenticating: ad))
        }
        #expect(mac == row.authenticationCode(for: message))
        #expect(mac != storage.authenticationCode(for: message))
        #expect(try storage.open(sealed, authenticating: ad) == plaintext)
        #expect(throws: CryptoError.self) { try row.open(sealed, authenticating: ad) }
    }

    @Test func callerMemoryFormsAgreeWithTheArrayForms() throws {
        let h = try SymmetricKeyHandle.random()
        var mac = [UInt8](repeating: 0, count: 32)
        var sealed = [UInt8](repeating: 0, count: plaintext.count + 40)
        try h.withScope { (s: borrowing KeyScope) throws in
            message.withUnsafeBytes { m in mac.withUnsafeMutableBytes { s.authenticationCode(for: m, into: $0) } }
            try plaintext.withUnsafeBytes { (p: UnsafeRawBufferPointer) throws in
                try ad.withUnsafeBytes { (a: UnsafeRawBufferPointer) throws in
                    try sealed.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in
                        try s.seal(p, authenticating: a, into: o)
                    }
                }
            }
        }
        #expect(mac == h.authenticationCode(for: message))
        #expect(try h.open(sealed, authenticating: ad) == plaintext)
        // Two seals of the same plaintext differ (a fresh random nonce each time).
        #expect(try h.seal(plaintext, authenticating: ad).prefix(24) != sealed.prefix(24))

        // Opening into caller memory: the plaintext on success; on a changed byte or wrong
        // associated data, authenticationFailed and a zeroed output.
        var out = [UInt8](repeating: 0xAA, count: plaintext.count)
        try h.withScope { (s: borrowing KeyScope) throws in
            try sealed.withUnsafeBytes { (c: UnsafeRawBufferPointer) throws in
                try ad.withUnsafeBytes { (a: UnsafeRawBufferPointer) throws in
                    try out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in try s.open(c, authenticating: a, into: o) }
                }
            }
        }
        #expect(out == plaintext)
        for (bytes, data) in [(sealed, Array("other".utf8)), ([sealed[0] ^ 1] + sealed.dropFirst(), ad)] {
            out = [UInt8](repeating: 0xAA, count: plaintext.count)
            #expect(throws: CryptoError.authenticationFailed) {
                try h.withScope { (s: borrowing KeyScope) throws in
                    try bytes.withUnsafeBytes { (c: UnsafeRawBufferPointer) throws in
                        try data.withUnsafeBytes { (a: UnsafeRawBufferPointer) throws in
                            try out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in try s.open(c, authenticating: a, into: o) }
                        }
                    }
                }
            }
            #expect(out == [UInt8](repeating: 0, count: plaintext.count))
        }
        // Output buffers of the wrong size are refused, not overrun.
        var short = [UInt8](repeating: 0, count: plaintext.count + 39)
        #expect(throws: CryptoError.self) {
            try h.withScope { (s: borrowing KeyScope) throws in
                try plaintext.withUnsafeBytes { (p: UnsafeRawBufferPointer) throws in
                    try short.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in
                        try s.seal(p, authenticating: UnsafeRawBufferPointer(start: nil, count: 0), into: o)
                    }
                }
            }
        }
    }
}
