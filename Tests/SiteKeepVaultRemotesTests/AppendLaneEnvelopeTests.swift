import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepVault
@testable import SiteKeepVaultRemotes

/// Issue 48, items 2 and 5: an agent's message sealed to the lane key (libsodium's sealed box),
/// opened only with the vault's keys in custody; plain JSON shown as plain, anything else opaque.
@Suite("Lane messages: sealed, plain, opaque")
struct AppendLaneEnvelopeTests {
    static let mine = try! keys(String(repeating: "5a", count: 32) + ":envvault1")
    static let other = try! keys(String(repeating: "a5", count: 32) + ":envvault2")

    @Test func aSealedEnvelopeOpensOnlyWithItsVaultsKeys() throws {
        let laneKey = try Self.mine.appendLanePublicKey()
        let again = try Self.mine.appendLanePublicKey(), others = try Self.other.appendLanePublicKey()
        #expect(laneKey.count == 32 && laneKey == again, "the lane key is the vault's, stable")
        #expect(laneKey != others)
        let e = try LaneEnvelope(title: "Daily brief", from: "brief-bot", body: "three things\n<script>alert(1)</script>",
                                 attachments: [LaneAttachment(name: "a.txt", bytes: Array("x".utf8))], links: ["https://example.com/x"])
        let sealed = try e.sealed(to: laneKey)
        #expect(!String(decoding: sealed, as: UTF8.self).contains("Daily brief"), "the server sees ciphertext only")
        #expect(LaneContent.read(sealed, keys: Self.mine) == .sealed(e))
        #expect(LaneContent.read(sealed, keys: Self.other) == .opaque(size: sealed.count), "another vault's keys open nothing")
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(LaneContent.read(tampered, keys: Self.mine) == .opaque(size: sealed.count), "a changed byte: undecryptable, shown as opaque")
        #expect(LaneContent.read(Array(sealed.prefix(20)), keys: Self.mine) == .opaque(size: 20))
    }

    @Test func plainJSONIsPlainAndEverythingElseOpaque() throws {
        let plain = Array(#"{"type":"note","title":"from an app"}"#.utf8)
        guard case .plain(let doc) = LaneContent.read(plain, keys: Self.mine) else { Issue.record("not plain"); return }
        #expect(doc["title"]?.stringValue == "from an app")
        #expect(LaneContent.read(Array("<html><script>x</script></html>".utf8), keys: Self.mine) == .opaque(size: 31))
        #expect(LaneContent.read([0, 1, 2], keys: Self.mine) == .opaque(size: 3))
    }

    @Test func envelopesOutOfBoundsAreRefusedBeforeSending() throws {
        #expect(throws: AppendLaneError.self) { try LaneEnvelope(title: "", from: "a", body: "b") }
        #expect(throws: AppendLaneError.self) { try LaneEnvelope(title: String(repeating: "t", count: 201), from: "a", body: "b") }
        #expect(throws: AppendLaneError.self) { try LaneEnvelope(title: "t", from: "a", body: nil) }
        let big = try LaneEnvelope(title: "t", from: "a", body: nil, attachments: [LaneAttachment(name: "big", bytes: [UInt8](repeating: 7, count: AppendLane.maxPayloadBytes))])
        #expect(throws: AppendLaneError.self) { _ = try big.sealed(to: try Self.mine.appendLanePublicKey()) }
        #expect(throws: AppendLaneError.self) { _ = try LaneEnvelope(title: "t", from: "a", body: "b").sealed(to: [1, 2, 3]) }
    }
}
