import Foundation
import Testing
@testable import SiteKeepCustody

/// The stored key record is read and written without Foundation (so a one-shot read links
/// none); what it writes must stay what `JSONEncoder` with `.sortedKeys` wrote, both ways.
@Suite struct KeyRecordCodingTests {
    static let records: [KeyRecord] = [
        KeyRecord(format: 1, id: "k1", name: "Ana \"the editor\" / é", algorithm: .ed25519,
                  versions: [.init(version: 1, created: 1_760_000_000_123, publicKey: "ab/cd+ef==", wrapped: "x/y+z/w==")]),
        KeyRecord(format: 1, id: "k2", name: "ops", algorithm: .p256,
                  versions: [.init(version: 1, created: 1, publicKey: "MFkw/A==", wrapped: "AA=="),
                             .init(version: 2, created: -5, publicKey: "MFkw/B==", wrapped: "/////w==")],
                  ssh: SSHAgentPolicy(enabled: true, login: false, namespaces: ["git", "file"], otherData: false)),
        KeyRecord(format: 1, id: "k3", name: "", algorithm: .ed25519,
                  versions: [.init(version: 1, created: 0, publicKey: "", wrapped: "")],
                  ssh: SSHAgentPolicy(enabled: false, login: true, namespaces: nil, otherData: true)),
    ]

    @Test(arguments: records.indices) func whatJSONEncoderWroteIsReadAndWhatIsWrittenJSONDecoderReads(index: Int) throws {
        let record = Self.records[index]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let old = try Array(encoder.encode(OldKeyRecord(record)))   // escapes "/" as "\/"
        #expect(KeyRecord.decode(old) == record)
        let new = record.encoded()
        #expect(try JSONDecoder().decode(OldKeyRecord.self, from: Data(new)).record == record)
        #expect(KeyRecord.decode(new) == record)
        // Same members, same order, same values: only the escaping of "/" may differ.
        #expect(String(decoding: old, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/") == String(decoding: new, as: UTF8.self))
    }

    @Test func unknownMembersAreIgnoredAndWrongTypesRefused() throws {
        let good = #"{"algorithm":"ed25519","format":1,"future":{"x":[1,2]},"id":"k","name":"n","versions":[{"created":3,"publicKey":"p","version":1,"wrapped":"w","note":null}]}"#
        let r = try #require(KeyRecord.decode(Array(good.utf8)))
        #expect(r.id == "k" && r.versions.count == 1 && r.versions[0].created == 3 && r.ssh == nil)
        for bad in [
            #"{"algorithm":"rsa","format":1,"id":"k","name":"n","versions":[]}"#,
            #"{"algorithm":"ed25519","format":"1","id":"k","name":"n","versions":[]}"#,
            #"{"algorithm":"ed25519","format":1,"id":"k","versions":[]}"#,
            #"{"algorithm":"ed25519","format":1.5,"id":"k","name":"n","versions":[]}"#,
            #"{"algorithm":"ed25519","format":1,"id":"k","name":"n","versions":[{"created":3,"publicKey":"p","version":1}]}"#,
            #"{"algorithm":"ed25519","format":1,"id":"k","name":"n","versions":[],"ssh":{"enabled":true,"login":false,"otherData":false,"namespaces":[1]}}"#,
            #"{"algorithm":"ed25519","format":1,"id":"k","name":"n","versions":[],"ssh":{"enabled":true}}"#,
            #"[]"#, "", #"{"algorithm":"ed25519""#,
        ] {
            #expect(KeyRecord.decode(Array(bad.utf8)) == nil, "\(bad)")
        }
    }
}

/// `KeyRecord` (with `SSHAgentPolicy`) as it was declared when Foundation's synthesized `Codable`
/// wrote it: what an older SiteKeep wrote and reads. The record is no longer `Codable`.
struct OldKeyRecord: Codable {
    struct Version: Codable { var version: Int; var created: Int64; var publicKey: String; var wrapped: String }
    struct Policy: Codable { var enabled: Bool; var login: Bool; var namespaces: [String]?; var otherData: Bool }
    var format: Int
    var id: String
    var name: String
    var algorithm: String
    var versions: [Version]
    var ssh: Policy? = nil

    init(_ r: KeyRecord) {
        format = r.format; id = r.id; name = r.name; algorithm = r.algorithm.rawValue
        versions = r.versions.map { Version(version: $0.version, created: $0.created, publicKey: $0.publicKey, wrapped: $0.wrapped) }
        ssh = r.ssh.map { Policy(enabled: $0.enabled, login: $0.login, namespaces: $0.namespaces, otherData: $0.otherData) }
    }

    var record: KeyRecord? {
        guard let algorithm = SigningAlgorithm(rawValue: algorithm) else { return nil }
        return KeyRecord(format: format, id: id, name: name, algorithm: algorithm,
                         versions: versions.map { .init(version: $0.version, created: $0.created, publicKey: $0.publicKey, wrapped: $0.wrapped) },
                         ssh: ssh.map { SSHAgentPolicy(enabled: $0.enabled, login: $0.login, namespaces: $0.namespaces, otherData: $0.otherData) })
    }
}
