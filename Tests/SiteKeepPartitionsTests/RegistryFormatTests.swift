import Foundation
import Testing
import SiteKeepCustody
@testable import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepVocabulary

/// `sites.json` is written and read by SiteKeepJSON (issue 35, item 4). Older SiteKeep versions,
/// the demo and people read it, and Foundation's `JSONEncoder` wrote it before: the writer must
/// give the bytes that encoder gave, and the reader must read what it wrote as `JSONDecoder` did.
@Suite struct RegistryFormatTests {
    /// Every `sites.json` an older SiteKeep wrote that the repository keeps: the real code's
    /// output (`sitekeep site add`, the fixture scripts), and the capture with every awkward value.
    static let writtenByJSONEncoder = [
        "stores/sites-json-v1.json", "stores/before-restructure/home/sites.json",
        "stores/core-state-store-wide/home/sites.json", "stores/before-domain-move/home/sites.json",
        "stores/json-encoder/sites.json", "stores/json-encoder/sites-empty.json",
    ]

    @Test(arguments: writtenByJSONEncoder)
    func whatJSONEncoderWroteIsReadAndWrittenAgainByteForByte(_ fixture: String) throws {
        let old = Array(try Fixtures.data(fixture))
        let sites = try RegistryFormat.decoded(old)
        let written = RegistryFormat.encoded(sites)
        #expect(written == old, "\(fixture) is written as:\n\(String(decoding: written, as: UTF8.self))")
    }

    @Test func theCaptureReadsAsTheSitesItWasWrittenFrom() throws {
        let sites = try RegistryFormat.decoded(Array(try Fixtures.data("stores/json-encoder/sites.json")))
        try #require(sites.count == 2)
        #expect(sites[0].id.string == "2a436ddc-ce2a-4ed1-8012-a0e516e84c2d" && sites[0].isAppBound && sites[0].protection == .afterLogin)
        #expect(sites[0].grants.isEmpty && sites[0].origins.map(\.serialized) == ["https://promptugal.news:443"])
        // Written from 1764587299.999: the encoder dropped the fraction.
        #expect(sites[0].createdAt.timeIntervalSince1970 == 1_764_587_299 && sites[0].lastUsedAt.timeIntervalSince1970 == 1_764_587_299)
        #expect(sites[1].displayName.unicodeScalars.elementsEqual("Caf\u{e9} \"Q\" \\ / \u{65}\u{301} \u{65E5}\u{672C} \u{1F600} \u{7f} \u{2028}".unicodeScalars))
        #expect(sites[1].origins.map(\.serialized) == ["https://xn--caf-dma.example:443", "http://[::1]:8080", "http://127.0.0.1:80"])
        #expect(sites[1].grants == ["key.sign", "schedule.get"] && !sites[1].isAppBound && sites[1].protection == .whenUnlocked)
        #expect(sites[1].createdAt.timeIntervalSince1970 == -2)
    }

    /// A site's hosts (issue 36) are kept in `sites.json` and read back: a path alone, or a path
    /// with the SHA-256 kept; a site without hosts is written as before (no member).
    @Test func hostsAreWrittenReadAgainAndAbsentWhenThereAreNone() throws {
        let dir = TempDir()
        let reg = try SiteRegistry(home: dir.url.appendingPathComponent("home"), keys: MemoryKeyProvider())
        let pinned = try SiteHost(path: "/home/me/bin/viewer", sha256: String(repeating: "ab", count: 32))
        let trusted = try SiteHost(path: "/usr/bin/viewer", sha256: nil)
        let s = try reg.add(displayName: "News", origins: ["https://news.example"], appBound: true, hosts: [pinned, trusted])
        _ = try reg.add(displayName: "Plain", origins: ["https://plain.example"], appBound: true)
        let bytes = Array(try Data(contentsOf: dir.url.appendingPathComponent("home/sites.json")))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.components(separatedBy: "\"hosts\"").count == 2, "only the site with hosts has the member:\n\(text)")
        let read = try RegistryFormat.decoded(bytes)
        #expect(read.first { $0.id == s.id }?.hosts == [pinned, trusted])
        #expect(RegistryFormat.encoded(read) == bytes)
        // Removing one keeps the other; a site that is not app-bound takes none.
        let now = try reg.updateHosts(forIdentifier: s.id) { $0.filter { $0 != pinned } }
        #expect(now.hosts == [trusted])
        #expect(throws: PartitionError.self) { try reg.add(displayName: "X", origins: ["https://x.example"], appBound: false, hosts: [trusted]) }
        // A stored host that is not one is damage, named.
        let bad = Array(text.replacingOccurrences(of: "\\/usr\\/bin\\/viewer", with: "viewer").utf8)
        #expect(throws: PartitionError.self) { try RegistryFormat.decoded(bad) }
    }

    /// What the new writer writes, an older SiteKeep (`JSONDecoder` on the old declarations) reads.
    @Test func jsonDecoderReadsWhatIsWritten() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        let reg = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        let a = try reg.add(displayName: "Caf\u{e9} \"A\" / \\", origins: ["https://a.example", "http://localhost:8080"], appBound: true)
        let b = try reg.add(displayName: "B", origins: ["https://b.example"], appBound: true, protection: .whenUnlocked)
        try reg.setGrants(["schedule.get"], forIdentifier: b.id)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let old = try decoder.decode(OldRegistryFile.self, from: Data(contentsOf: home.appendingPathComponent("sites.json")))
        #expect(old.version == 1)
        let byID = Dictionary(uniqueKeysWithValues: old.sites.map { ($0.id, $0) })
        #expect(byID[a.id.string]?.displayName == a.displayName && byID[a.id.string]?.origins == ["https://a.example:443", "http://localhost:8080"])
        #expect(byID[a.id.string]?.protection == "after-login" && byID[a.id.string]?.grants == [] && byID[a.id.string]?.isAppBound == true)
        #expect(byID[b.id.string]?.grants == ["schedule.get"] && byID[b.id.string]?.protection == "when-unlocked")
        #expect(byID[a.id.string].map { abs($0.createdAt.timeIntervalSince(a.createdAt)) < 1 } == true)
        // And the file is what JSONEncoder would have written of the same values.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        #expect(try encoder.encode(old) == Data(contentsOf: home.appendingPathComponent("sites.json")))
    }

    /// Forms JSONDecoder read though JSONEncoder never wrote them (a hand edit, another tool).
    @Test func readsWhatJSONDecoderRead() throws {
        let text = #"{"extra":{"x":[1]},"version":1.0,"sites":[{"protection":"after-login","origins":["https://A.example/","http://127.0.0.1"],"#
            + #""id":"2A436DDC-CE2A-4ED1-8012-A0E516E84C2D","displayName":"N","isAppBound":false,"createdAt":"2026-12-01T13:08:19.5+02:00","#
            + #""lastUsedAt":"2026-12-01T11:08:19z","grants":null,"future":true}]}"#
        let sites = try RegistryFormat.decoded(Array(text.utf8))
        try #require(sites.count == 1)
        #expect(sites[0].id.string == "2a436ddc-ce2a-4ed1-8012-a0e516e84c2d")
        #expect(sites[0].origins.map(\.serialized) == ["https://a.example:443", "http://127.0.0.1:80"])
        #expect(sites[0].createdAt.timeIntervalSince1970 == 1_796_123_299.5 && sites[0].lastUsedAt.timeIntervalSince1970 == 1_796_123_299)
        #expect(sites[0].grants.isEmpty)
    }

    /// Each damage is refused with the file, the member and what is wrong, and changes nothing.
    @Test(arguments: [
        ("{not json", "sites.json is not valid JSON (invalid JSON at byte 1: unexpected character 'n')"),
        ("[]", "sites.json: the document must be a JSON object, found array"),
        (#"{"sites":[]}"#, "sites.json: version is missing"),
        (#"{"version":"1","sites":[]}"#, "sites.json: version must be a whole number, found string"),
        (#"{"version":2,"sites":[]}"#, "sites.json: version is 2; this SiteKeep reads version 1 (a newer SiteKeep wrote it?)"),
        (#"{"version":1,"sites":{}}"#, "sites.json: sites must be an array, found object"),
        (#"{"version":1,"sites":[1]}"#, "sites.json: sites[0] must be a JSON object, found integer"),
        (#"{"version":1,"sites":[{"id":"x"}]}"#, "sites.json: sites[0].id is not a site identifier: "),
        (RegistryFormatTests.site(replacing: "\"isAppBound\":true", with: "\"isAppBound\":1"), "sites.json: sites[0].isAppBound must be true or false, found integer"),
        (RegistryFormatTests.site(replacing: "\"displayName\":\"N\",", with: ""), "sites.json: sites[0].displayName is missing"),
        (RegistryFormatTests.site(replacing: "\"displayName\":\"N\"", with: "\"displayName\":null"), "sites.json: sites[0].displayName must be a string, found null"),
        (RegistryFormatTests.site(replacing: "\"https://a.example\"", with: "\"https://a.example\",\"ftp://b\""), "sites.json: sites[0].origins[1] is not an origin: "),
        (RegistryFormatTests.site(replacing: "\"after-login\"", with: "\"always\""), "sites.json: sites[0].protection is \"always\"; it must be one of after-login, when-unlocked"),
        (RegistryFormatTests.site(replacing: "\"2026-12-01T11:08:19Z\"", with: "\"2026-12-01 11:08:19Z\""), "sites.json: sites[0].createdAt is \"2026-12-01 11:08:19Z\", not an ISO 8601 time such as 2026-12-01T11:08:19Z"),
        (RegistryFormatTests.site(replacing: "\"grants\":[]", with: "\"grants\":[\"a\",2]"), "sites.json: sites[0].grants[1] must be a string, found integer"),
    ])
    func damageIsNamedAndNothingIsWritten(_ text: String, _ expected: String) throws {
        do {
            _ = try RegistryFormat.decoded(Array(text.utf8))
            Issue.record("\(text) was read")
        } catch {
            guard case .registryDamaged(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.hasPrefix(expected), "\(why)")
        }
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        _ = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        let file = home.appendingPathComponent("sites.json")
        try Data(text.utf8).write(to: file)
        #expect(throws: PartitionError.self) { try SiteRegistry(home: home, keys: MemoryKeyProvider()) }
        #expect(throws: PartitionError.self) { try SiteRegistry.sites(inHome: home) }
        #expect(try Data(contentsOf: file) == Data(text.utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).sorted() == ["sites", "sites.json", "sites.json.lock"])
    }

    static func site(replacing: String, with: String) -> String {
        (#"{"version":1,"sites":[{"id":"2a436ddc-ce2a-4ed1-8012-a0e516e84c2d","displayName":"N","origins":["https://a.example"],"#
            + #""isAppBound":true,"protection":"after-login","createdAt":"2026-12-01T11:08:19Z","lastUsedAt":"2026-12-01T11:08:19Z","grants":[]}]}"#)
            .replacingOccurrences(of: replacing, with: with)
    }

    /// Times are written as Foundation's `.iso8601` strategy wrote them, and read as it read them.
    @Test func timesAreWrittenAndReadAsTheISO8601StrategyDid() throws {
        let formatter = ISO8601DateFormatter()
        var rng = SystemRandomNumberGenerator()
        // 1900 to 2200, whole and fractional, and the edges of days, months and leap years.
        var samples: [Double] = [0, -1, -0.5, 0.999, 86_399.999, 951_782_400, 951_868_799, 4_107_542_399, -2_208_988_800]
        for _ in 0..<2000 { samples.append(Double(Int64.random(in: -2_208_988_800...7_258_118_400, using: &rng)) + [0, 0.25, 0.999][Int.random(in: 0...2, using: &rng)]) }
        for t in samples {
            let date = Date(timeIntervalSince1970: t)
            let text = ISO8601Seconds.format(date)
            #expect(text == formatter.string(from: date), "\(t)")
            #expect(ISO8601Seconds.parse(text)?.timeIntervalSince1970 == t.rounded(.down), "\(text)")
        }
        for (text, seconds) in [("2026-12-01T11:08:19Z", 1_796_123_299.0), ("2026-12-01T11:08:19.5Z", 1_796_123_299.5),
                                ("2026-12-01T13:08:19+02:00", 1_796_123_299), ("2026-12-01T13:08:19+0200", 1_796_123_299),
                                ("2026-12-01T06:08:19-05:00", 1_796_123_299), ("2026-12-01T11:08:19z", 1_796_123_299),
                                ("2026-02-30T11:08:19Z", 1_772_449_699), ("2026-12-01T24:00:00Z", 1_796_169_600)] {
            #expect(ISO8601Seconds.parse(text)?.timeIntervalSince1970 == seconds, "\(text)")
        }
        for text in ["2026-12-01 11:08:19Z", "2026-12-01T11:08:19", "20261201T110819Z", "2026-12-01", "2026-12-01T11:08Z",
                     " 2026-12-01T11:08:19Z", "2026-12-01T11:08:19Z ", "2026-13-01T11:08:19Z", "2026-12-01T11:08:19.Z", "2026-12-01T11:08:19+2"] {
            #expect(ISO8601Seconds.parse(text) == nil, "\(text)")
        }
    }
}

/// The cache's entry rows (status, headers, body hash) are written and read by SiteKeepJSON.
@Suite struct CacheEntryRowTests {
    static let record = CacheEntryRecord(status: 200, headers: [HeaderField(name: "Content-Type", value: "text/html; charset=utf-8"),
                                                                HeaderField(name: "X-\u{e9}", value: "a/b \"q\" \u{1}")], sha256: "ab12")

    /// `JSONEncoder` wrote the members in a different order per process; every order is read.
    @Test func rowsJSONEncoderWroteAreRead() throws {
        let lines = try Fixtures.text("stores/json-encoder/cache-entry-rows.jsonl").split(separator: "\n").map { Array($0.utf8) }
        try #require(lines.count == 4)
        for line in lines.prefix(3) { #expect(CacheEntryRecord.decoded(line) == Self.record, "\(String(decoding: line, as: UTF8.self))") }
        #expect(CacheEntryRecord.decoded(lines[3]) == CacheEntryRecord(status: 404, headers: [], sha256: ""))
        #expect(CacheEntryRecord.decoded(Array(#"{"status":200.0,"headers":[],"sha256":"a","x":1}"#.utf8)) == CacheEntryRecord(status: 200, headers: [], sha256: "a"))
    }

    @Test func theRowIsCompactInDeclarationOrderAndJSONDecoderReadsIt() throws {
        let bytes = Self.record.encoded()
        #expect(String(decoding: bytes, as: UTF8.self) ==
                #"{"status":200,"headers":[{"name":"Content-Type","value":"text/html; charset=utf-8"},{"name":"X-\#u{e9}","value":"a/b \"q\" \u0001"}],"sha256":"ab12"}"#)
        let old = try JSONDecoder().decode(OldCacheEntryRecord.self, from: Data(bytes))
        #expect(old.status == 200 && old.sha256 == "ab12" && old.headers.map(\.name) == ["Content-Type", "X-\u{e9}"] && old.headers[1].value == "a/b \"q\" \u{1}")
        // Only the escaping of "/" and the member order differ from what JSONEncoder wrote.
        let lines = try Fixtures.text("stores/json-encoder/cache-entry-rows.jsonl").split(separator: "\n")
        #expect(lines[1].replacingOccurrences(of: "\\/", with: "/").utf8.count == bytes.count)
    }

    @Test func aRowThatIsNotOneIsRefused() {
        for bad in ["", "[]", "{}", #"{"status":"200","headers":[],"sha256":"a"}"#, #"{"status":200.5,"headers":[],"sha256":"a"}"#,
                    #"{"status":200,"headers":[{"name":"n"}],"sha256":"a"}"#, #"{"status":200,"headers":{},"sha256":"a"}"#,
                    #"{"status":200,"headers":[]}"#, #"{"status":200,"headers":[],"sha256":null}"#] {
            #expect(CacheEntryRecord.decoded(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    /// The row a store writes is that form, and reads back.
    @Test func aStoredEntrysRowIsTheNewForm() throws {
        let dir = TempDir()
        let reg = try SiteRegistry(home: dir.url.appendingPathComponent("home"), keys: MemoryKeyProvider())
        let site = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let p = try reg.openPartition(forIdentifier: site.id)
        defer { p.close() }
        let resource = CachedResource(url: "https://a.example/x", status: 203, headers: Self.record.headers, body: Array("body/ü".utf8))
        try p.cache.store(resource)
        let row = try #require(try p.openCore().get(.cache, resource.url))
        let sha = try #require(CacheEntryRecord.decoded(row)?.sha256)
        #expect(sha.utf8.count == 64 && sha.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        #expect(row == CacheEntryRecord(status: 203, headers: Self.record.headers, sha256: sha).encoded())
        #expect(try p.cache.resource(for: resource.url) == resource)
    }
}

/// The registry file and site as an older SiteKeep declared them (`Site`'s hand-written
/// `Codable`, with identifiers and origins as the strings they encoded to).
struct OldRegistryFile: Codable {
    struct OldSite: Codable {
        var id: String
        var displayName: String
        var origins: [String]
        var isAppBound: Bool
        var protection: String
        var createdAt: Date
        var lastUsedAt: Date
        var grants: [String] = []
        private enum CodingKeys: String, CodingKey { case id, displayName, origins, isAppBound, protection, createdAt, lastUsedAt, grants }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            displayName = try c.decode(String.self, forKey: .displayName)
            origins = try c.decode([String].self, forKey: .origins)
            isAppBound = try c.decode(Bool.self, forKey: .isAppBound)
            protection = try c.decode(String.self, forKey: .protection)
            createdAt = try c.decode(Date.self, forKey: .createdAt)
            lastUsedAt = try c.decode(Date.self, forKey: .lastUsedAt)
            grants = try c.decodeIfPresent([String].self, forKey: .grants) ?? []
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(displayName, forKey: .displayName)
            try c.encode(origins, forKey: .origins)
            try c.encode(isAppBound, forKey: .isAppBound)
            try c.encode(protection, forKey: .protection)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(lastUsedAt, forKey: .lastUsedAt)
            if !grants.isEmpty { try c.encode(grants, forKey: .grants) }
        }
    }
    var version: Int
    var sites: [OldSite]
}

/// The cache entry row as an older SiteKeep declared it.
struct OldCacheEntryRecord: Codable {
    struct Header: Codable { var name: String; var value: String }
    var status: Int
    var headers: [Header]
    var sha256: String
}
