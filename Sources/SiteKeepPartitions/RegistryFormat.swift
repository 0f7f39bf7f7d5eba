import Foundation
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepVocabulary

// `sites.json`, the site registry file: its one writer and its one reader, on SiteKeepJSON.
//
// A stored format read by older SiteKeep versions, the demo and people: the writer keeps the
// bytes Foundation's `JSONEncoder` wrote with `[.prettyPrinted, .sortedKeys]` and `.iso8601`
// dates (Fixtures/stores/sites-json-v1.json), and the reader reads what that encoder wrote as
// `JSONDecoder` read it.

/// The registry file's form (version 1):
///
/// ```
/// {
///   "sites" : [
///     {
///       "createdAt" : "2026-12-01T11:08:19Z",
///       "displayName" : "Promptugal",
///       "grants" : [ … ],                      (only when the site has some)
///       "hosts" : [ { "path" : …, "sha256" : … } ],   (only when the site has some; sha256 only when kept)
///       "id" : "2a436ddc-ce2a-4ed1-8012-a0e516e84c2d",
///       "isAppBound" : true,
///       "lastUsedAt" : "2026-12-01T11:08:19Z",
///       "origins" : [
///         "https:\/\/promptugal.news:443"
///       ],
///       "protection" : "after-login",
///       "tag" : "3f0c…"                        (custody's record tag, hex; absent before tags)
///     }
///   ],
///   "version" : 1
/// }
/// ```
/// Members sorted by key, `" : "`, two-space indentation, `/` escaped as `\/`, dates in whole
/// UTC seconds (a fraction is dropped, as the encoder's `.iso8601` dropped it), no final newline:
/// SiteKeepJSON's ``JSONSerializer/Style/foundationPretty``.
enum RegistryFormat {
    /// The file's name, for messages.
    static let fileName = "sites.json"
    /// The one version there is.
    static let version: Int64 = 1

    /// The file's bytes for `sites` (in the order given: the registry sorts them by identifier).
    static func encoded(_ sites: [Site]) -> [UInt8] {
        let list: [JSONValue] = sites.map { site in
            var members = [
                JSONMember(key: "createdAt", value: .string(ISO8601Seconds.format(site.createdAt))),
                JSONMember(key: "displayName", value: .string(site.displayName)),
            ]
            // Written only when there are some, so a store without grants reads as before everywhere.
            if !site.grants.isEmpty { members.append(JSONMember(key: "grants", value: .array(site.grants.map { .string($0) }))) }
            // The same for the hosts the user added (an older SiteKeep ignores the member).
            if !site.hosts.isEmpty {
                members.append(JSONMember(key: "hosts", value: .array(site.hosts.map { host in
                    .object([JSONMember(key: "path", value: .string(host.path))]
                        + (host.sha256.map { [JSONMember(key: "sha256", value: .string($0))] } ?? []))
                })))
            }
            members += [
                JSONMember(key: "id", value: .string(site.id.string)),
                JSONMember(key: "isAppBound", value: .bool(site.isAppBound)),
                JSONMember(key: "lastUsedAt", value: .string(ISO8601Seconds.format(site.lastUsedAt))),
                JSONMember(key: "origins", value: .array(site.origins.map { .string($0.serialized) })),
                JSONMember(key: "protection", value: .string(site.protection.rawValue)),
            ]
            // Absent for an entry from before tags (the registry ignores such an entry until approved).
            if let tag = site.tag { members.append(JSONMember(key: "tag", value: .string(Hex.encode(tag)))) }
            return .object(members)
        }
        return JSONSerializer.bytes(.object([JSONMember(key: "sites", value: .array(list)),
                                             JSONMember(key: "version", value: .int(version))]), style: .foundationPretty)
    }

    /// The sites in the file's bytes, as `JSONDecoder` read them: members in any order, unknown
    /// members ignored, `\/` or `/`, a whole number with or without a fraction, `grants` absent
    /// or null for none, dates with or without a fraction and with `Z` or an offset, origins
    /// parsed and made canonical again.
    /// - Throws: ``PartitionError/registryDamaged(_:)`` naming the file, the member (e.g.
    ///   `sites[1].origins[0]`) and what is wrong with it.
    static func decoded(_ bytes: some Collection<UInt8>) throws(PartitionError) -> [Site] {
        let document: JSONValue
        do { document = try JSONParser.parse(bytes, limits: .document) } catch {
            throw .registryDamaged("\(fileName) is not valid JSON (\(error))")
        }
        do throws(RegistryFormatError) {
            guard case .object = document else { throw RegistryFormatError("the document", "must be a JSON object, found \(document.typeName)") }
            var file = try reader(document, "the document")
            let v = try integer(try required(&file, "version"), "version")
            guard v == version else {
                throw RegistryFormatError("version", "is \(v); this SiteKeep reads version \(version) (a newer SiteKeep wrote it?)")
            }
            let list = try required(&file, "sites")
            guard case .array(let items) = list else { throw RegistryFormatError("sites", "must be an array, found \(list.typeName)") }
            return try items.enumerated().map { (i, item) throws(RegistryFormatError) in try site(item, path: "sites[\(i)]") }
        } catch {
            throw .registryDamaged("\(fileName): \(error.path) \(error.problem)")
        }
    }

    private static func site(_ value: JSONValue, path: String) throws(RegistryFormatError) -> Site {
        var r = try reader(value, path)
        let idText = try string(&r, "id", path)
        let id: SiteID
        do { id = try SiteID(parsing: idText) } catch { throw RegistryFormatError("\(path).id", "is not a site identifier: \(error)") }
        let originList = try required(&r, "origins", path)
        guard case .array(let originItems) = originList else { throw RegistryFormatError("\(path).origins", "must be an array, found \(originList.typeName)") }
        var origins: [Origin] = []
        for (i, item) in originItems.enumerated() {
            guard case .string(let text) = item else { throw RegistryFormatError("\(path).origins[\(i)]", "must be a string, found \(item.typeName)") }
            do { origins.append(try Origin(parsing: text)) } catch { throw RegistryFormatError("\(path).origins[\(i)]", "is not an origin: \(error)") }
        }
        let appBound = try required(&r, "isAppBound", path)
        guard case .bool(let isAppBound) = appBound else { throw RegistryFormatError("\(path).isAppBound", "must be true or false, found \(appBound.typeName)") }
        let protectionText = try string(&r, "protection", path)
        guard let protection = ProtectionClass(rawValue: protectionText) else {
            throw RegistryFormatError("\(path).protection", "is \"\(protectionText.prefix(40))\"; it must be one of \(ProtectionClass.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var grants: [String] = []
        if let list = r.optional("grants"), !list.isNull {
            guard case .array(let items) = list else { throw RegistryFormatError("\(path).grants", "must be an array, found \(list.typeName)") }
            for (i, item) in items.enumerated() {
                guard case .string(let op) = item else { throw RegistryFormatError("\(path).grants[\(i)]", "must be a string, found \(item.typeName)") }
                grants.append(op)
            }
        }
        var hosts: [SiteHost] = []
        if let list = r.optional("hosts"), !list.isNull {
            guard case .array(let items) = list else { throw RegistryFormatError("\(path).hosts", "must be an array, found \(list.typeName)") }
            for (i, item) in items.enumerated() {
                var h = try reader(item, "\(path).hosts[\(i)]")
                let hostPath = try string(&h, "path", "\(path).hosts[\(i)]")
                var digest: String?
                if let d = h.optional("sha256"), !d.isNull {
                    guard case .string(let text) = d else { throw RegistryFormatError("\(path).hosts[\(i)].sha256", "must be a string, found \(d.typeName)") }
                    digest = text
                }
                do { hosts.append(try SiteHost(path: hostPath, sha256: digest)) } catch {
                    throw RegistryFormatError("\(path).hosts[\(i)]", "is not a host: \(error)")
                }
            }
        }
        var tag: [UInt8]?
        if let t = r.optional("tag"), !t.isNull {
            // A tag that is not 32 bytes of hex is kept as an empty tag, which never verifies: the
            // entry is ignored until approved, as any entry whose tag does not (the file stays readable).
            if case .string(let text) = t, let bytes = try? Hex.decode(text), bytes.count == 32 { tag = bytes } else { tag = [] }
        }
        return Site(id: id, displayName: try string(&r, "displayName", path), origins: origins, isAppBound: isAppBound,
                    protection: protection, createdAt: try date(&r, "createdAt", path), lastUsedAt: try date(&r, "lastUsedAt", path),
                    grants: grants, hosts: hosts, tag: tag)
    }

    private static func reader(_ value: JSONValue, _ path: String) throws(RegistryFormatError) -> JSONObjectReader {
        do { return try JSONObjectReader(value, path: path) } catch { throw RegistryFormatError(path, "must be a JSON object, found \(value.typeName)") }
    }

    private static func required(_ r: inout JSONObjectReader, _ key: String, _ path: String = "") throws(RegistryFormatError) -> JSONValue {
        guard let v = r.optional(key) else { throw RegistryFormatError(path.isEmpty ? key : "\(path).\(key)", "is missing") }
        return v
    }

    private static func string(_ r: inout JSONObjectReader, _ key: String, _ path: String) throws(RegistryFormatError) -> String {
        let v = try required(&r, key, path)
        guard case .string(let s) = v else { throw RegistryFormatError("\(path).\(key)", "must be a string, found \(v.typeName)") }
        return s
    }

    /// An integer written with or without a fraction (`1`, `1.0`), as `JSONDecoder` read an `Int`.
    private static func integer(_ v: JSONValue, _ path: String) throws(RegistryFormatError) -> Int64 {
        switch v {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 0x1p53: return Int64(d)
        default: throw RegistryFormatError(path, "must be a whole number, found \(v.typeName)")
        }
    }

    private static func date(_ r: inout JSONObjectReader, _ key: String, _ path: String) throws(RegistryFormatError) -> Date {
        let text = try string(&r, key, path)
        guard let d = ISO8601Seconds.parse(text) else {
            throw RegistryFormatError("\(path).\(key)", "is \"\(text.prefix(40))\", not an ISO 8601 time such as 2026-12-01T11:08:19Z")
        }
        return d
    }
}

/// What is wrong where in `sites.json` (becomes ``PartitionError/registryDamaged(_:)``).
struct RegistryFormatError: Error {
    /// The member, e.g. `sites[1].origins[0]`.
    let path: String
    /// What is wrong with it, e.g. `is missing`.
    let problem: String
    init(_ path: String, _ problem: String) { self.path = path; self.problem = problem }
}

/// ISO 8601 times in whole UTC seconds, as Foundation's `.iso8601` date strategy wrote them
/// (`2026-12-01T11:08:19Z`, the fraction dropped toward the past) and read them (a fraction,
/// `Z` or `z`, or an offset `+02:00` / `+0200`; as there, a day past the month's end or a
/// 24:00 rolls over). Plain arithmetic on the proleptic Gregorian calendar: no formatter, no
/// locale, no time zone database.
enum ISO8601Seconds {
    /// `YYYY-MM-DDTHH:MM:SSZ` for `date`, its fraction dropped.
    static func format(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        let seconds = t.isFinite ? Int64(max(min(t.rounded(.down), 0x1p50), -0x1p50)) : 0
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let s = seconds - days * 86_400
        let (y, m, d) = civil(fromDays: days)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let year = y >= 0 && y < 10_000 ? String(repeating: "0", count: 4 - String(y).count) + String(y) : String(y)
        return "\(year)-\(two(m))-\(two(d))T\(two(s / 3600)):\(two(s / 60 % 60)):\(two(s % 60))Z"
    }

    /// The time `text` names, or nil when it is not of the form above.
    static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int64? {
            guard i + n <= b.count else { return nil }
            var v: Int64 = 0
            for k in i..<(i + n) {
                guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[k] - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let y = digits(4), expect(0x2d), let mo = digits(2), expect(0x2d), let d = digits(2),
              expect(UInt8(ascii: "T")), let h = digits(2), expect(0x3a), let mi = digits(2), expect(0x3a), let s = digits(2),
              (1...12).contains(mo), (1...31).contains(d), h <= 24, mi <= 59, s <= 60 else { return nil }
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1, any = false
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                fraction += Double(b[i] - 0x30) * scale
                scale /= 10
                i += 1
                any = true
            }
            guard any else { return nil }
        }
        var offset: Int64 = 0
        guard i < b.count else { return nil }
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"): i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = b[i] == UInt8(ascii: "+") ? 1 : -1
            i += 1
            guard let oh = digits(2) else { return nil }
            _ = expect(0x3a)
            guard let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        default: return nil
        }
        guard i == b.count else { return nil }
        let seconds = days(fromCivil: y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
