/// The id of an immutable, content-addressed object: `obj-cas-imm-` + 12 or 32 lowercase hex,
/// the first hex digits of SHA-256 of the stored bytes (SGIT-FORMAT.md §3.5).
///
/// Only constructible through validation, so a value of this type is always safe to use as a
/// file name under `bare/data/`.
public struct ObjectID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The full id, e.g. `obj-cas-imm-9f5613e8b39d`.
    public let rawValue: String

    static let prefix = "obj-cas-imm-"

    /// Validates an id read from vault data or a request. Like sgit, surrounding whitespace is
    /// trimmed and upper case folded before the check.
    public init?(_ text: String) {
        guard let norm = Identifiers.normalise(text, prefix: Self.prefix, hexCounts: [12, 32]) else { return nil }
        rawValue = norm
    }

    /// The hex part.
    public var hex: Substring { rawValue.dropFirst(Self.prefix.count) }
    /// 12 (format 1) or 32 (format 2).
    public var width: Int { hex.count }
    /// `bare/data/<id>`, for messages.
    public var fileID: String { "bare/data/" + rawValue }

    public var description: String { rawValue }
    public static func < (a: ObjectID, b: ObjectID) -> Bool { a.rawValue < b.rawValue }
}

/// Validation of the other sgit ids (§2.1).
enum Identifiers {
    static func isLowerHex(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) || (0x61...0x66).contains(b) }

    /// Trims ASCII whitespace and lower-cases, then checks `prefix` + hex of an allowed count.
    static func normalise(_ text: String, prefix: String, hexCounts: ClosedRange<Int>) -> String? {
        normalise(text, prefix: prefix) { hexCounts.contains($0) }
    }

    static func normalise(_ text: String, prefix: String, hexCounts: Set<Int>) -> String? {
        normalise(text, prefix: prefix) { hexCounts.contains($0) }
    }

    private static func normalise(_ text: String, prefix: String, count ok: (Int) -> Bool) -> String? {
        var bytes = Array(text.utf8)
        guard bytes.count <= 200 else { return nil }
        while let f = bytes.first, f == 0x20 || (0x09...0x0d).contains(f) { bytes.removeFirst() }
        while let l = bytes.last, l == 0x20 || (0x09...0x0d).contains(l) { bytes.removeLast() }
        bytes = bytes.map { (0x41...0x5a).contains($0) ? $0 + 0x20 : $0 }
        let p = Array(prefix.utf8)
        guard bytes.starts(with: p) else { return nil }
        let hex = bytes[p.count...]
        guard ok(hex.count), hex.allSatisfy(isLowerHex) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `ref-pid-(muw|snw)-<12 hex>`.
    static func refID(_ text: String) -> String? {
        normalise(text, prefix: "ref-pid-muw-", hexCounts: [12]) ?? normalise(text, prefix: "ref-pid-snw-", hexCounts: [12])
    }

    /// `idx-pid-muw-<12 hex>`.
    static func indexID(_ text: String) -> String? { normalise(text, prefix: "idx-pid-muw-", hexCounts: [12]) }

    /// `key-rnd-imm-<8…64 hex>`.
    static func keyID(_ text: String) -> String? { normalise(text, prefix: "key-rnd-imm-", hexCounts: 8...64) }

    /// `branch-(named|clone)-<8…64 hex>`.
    static func branchID(_ text: String) -> String? {
        normalise(text, prefix: "branch-named-", hexCounts: 8...64) ?? normalise(text, prefix: "branch-clone-", hexCounts: 8...64)
    }

    /// `^[a-zA-Z0-9_\-]{1,64}$`.
    static func isBranchName(_ text: String) -> Bool {
        let u = text.utf8
        return (1...64).contains(u.count) && u.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x5f || $0 == 0x2d
        }
    }

    /// `^[A-Za-z0-9+/=]+$`, at most `max` characters.
    static func isBase64(_ text: String, max: Int) -> Bool {
        let u = text.utf8
        return (1...max).contains(u.count) && u.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2b || $0 == 0x2f || $0 == 0x3d
        }
    }
}
