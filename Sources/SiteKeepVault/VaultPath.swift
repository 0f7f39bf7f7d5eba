/// A path inside a vault, compared and sorted by its UTF-8 bytes.
///
/// Swift `String` equality treats `"é"` (U+00E9) and `"e\u{301}"` as equal; sgit stores names
/// as exact bytes and treats them as two files, so every comparison here is bytewise.
public struct VaultPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The path as stored (`/`-separated, relative, no normalisation). Empty for the root.
    public let string: String
    /// Its UTF-8 bytes: the identity used for `==`, hashing and ordering.
    public let bytes: [UInt8]

    init(unchecked string: String) {
        self.string = string
        bytes = Array(string.utf8)
    }

    /// The root folder.
    public static let root = VaultPath(unchecked: "")

    /// Validates a path from a request: relative, `/`-separated, no empty, `.` or `..` segment,
    /// no NUL or other control character, at most 4096 bytes. A single trailing `/` is accepted
    /// for folders. The empty string is the root.
    /// - Throws: ``VaultError/invalidPath(_:reason:)``.
    public init(validating text: String) throws(VaultError) {
        var t = text
        if t.utf8.count > 4096 { throw .invalidPath(String(text.prefix(64)), reason: "longer than 4096 bytes") }
        if t.utf8.first == UInt8(ascii: "/") { throw .invalidPath(text, reason: "absolute paths are refused") }
        if t.utf8.count > 1, t.utf8.last == UInt8(ascii: "/") { t.removeLast() }
        if t.isEmpty { self = .root; return }
        if t.utf8.contains(0) { throw .invalidPath(text, reason: "contains a NUL byte") }
        if t.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            throw .invalidPath(text, reason: "contains a control character")
        }
        for segment in t.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if segment.isEmpty { throw .invalidPath(text, reason: "has an empty segment (//)") }
            if segment.elementsEqual([0x2e]) { throw .invalidPath(text, reason: "has a '.' segment") }
            if segment.elementsEqual([0x2e, 0x2e]) { throw .invalidPath(text, reason: "'..' segments are refused") }
        }
        self.init(unchecked: t)
    }

    /// The segments, each as its exact bytes.
    var segments: [[UInt8]] {
        bytes.isEmpty ? [] : bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
    }

    /// `self/name`.
    func appending(_ name: String) -> VaultPath {
        string.isEmpty ? VaultPath(unchecked: name) : VaultPath(unchecked: string + "/" + name)
    }

    /// Whether this path is `prefix` or below it.
    func isWithin(_ prefix: VaultPath) -> Bool {
        if prefix.bytes.isEmpty { return true }
        guard bytes.starts(with: prefix.bytes) else { return false }
        return bytes.count == prefix.bytes.count || bytes[prefix.bytes.count] == UInt8(ascii: "/")
    }

    public static func == (a: VaultPath, b: VaultPath) -> Bool { a.bytes == b.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }
    public static func < (a: VaultPath, b: VaultPath) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
    public var description: String { string }
}
