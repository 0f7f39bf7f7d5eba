import Foundation
import Testing
@testable import SiteKeepPartitions

/// The associated data a partition value is sealed under, pinned byte for byte: a change here
/// makes every stored value fail to open (a format change, which needs a migration).
@Suite struct RowFormatTests {
    static let site = Array("00000000-0000-4000-8000-000000000001".utf8)

    @Test func associatedDataMatchesTheVector() {
        let ad = PartitionRowFormat.associatedData(site: Self.site, namespace: "storage", storedKey: [0x01, 0x02, 0xfe], bound: true)
        // "SKP1" ‖ be32(36) ‖ site ‖ be32(7) ‖ "storage" ‖ be32(3) ‖ 01 02 fe, written out by hand.
        let expected = "534b5031" + "00000024" + "30303030303030302d303030302d343030302d383030302d303030303030303030303031"
            + "00000007" + "73746f72616765" + "00000003" + "0102fe"
        #expect(hex(ad) == expected)
    }

    @Test func theHeaderIsBoundToTheMetaTable() {
        let ad = PartitionRowFormat.associatedData(site: Self.site, namespace: "meta", storedKey: Array("header".utf8), bound: true)
        #expect(hex(ad) == "534b5031" + "00000024" + hex(Self.site) + "00000004" + "6d657461" + "00000006" + "686561646572")
    }

    @Test func thePrefixIsTheStartOfTheWhole() {
        for ns in PartitionNamespace.builtIn + [PartitionNamespace("tabs", code: 2), PartitionNamespace("reading", code: 3)] {
            let prefix = PartitionRowFormat.associatedDataPrefix(site: Self.site, namespace: ns.rawValue, bound: true)
            let whole = PartitionRowFormat.associatedData(site: Self.site, namespace: ns.rawValue, storedKey: [9, 9], bound: true)
            #expect(whole == prefix + [0, 0, 0, 2, 9, 9], "\(ns)")
        }
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
