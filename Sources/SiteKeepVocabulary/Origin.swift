import Foundation

/// Why a string is not an acceptable web origin. Every case names the problem and what to write instead.
public enum OriginError: Error, Sendable, Equatable {
    /// The input was empty.
    case empty
    /// The input is longer than ``Origin/maximumLength``.
    case tooLong(Int)
    /// The opaque origin `null` names no site.
    case opaqueOrigin
    /// Whitespace, NUL, a control character or a backslash appears in the input (the scalar, as `U+XXXX`).
    case forbiddenCharacter(String)
    /// The scheme is missing or malformed (no `scheme://`).
    case missingScheme
    /// A scheme that never forms a site origin: `file`, `data`, `blob`, `javascript`, `about`.
    case forbiddenScheme(String)
    /// A scheme SiteKeep does not serve (only `https`, and `http` on loopback).
    case unsupportedScheme(String)
    /// Plain `http` to a host that is not loopback.
    case insecureScheme(host: String)
    /// `user:password@` before the host.
    case userinfoNotAllowed
    /// A path other than a bare `/`.
    case pathNotAllowed
    /// A `?query`.
    case queryNotAllowed
    /// A `#fragment`.
    case fragmentNotAllowed
    /// No host between `//` and the port or end.
    case emptyHost
    /// The port is not a decimal number from 1 to 65535 without leading zeros.
    case invalidPort(String)
    /// Percent-encoding in the host.
    case percentEncodedHost
    /// A host character outside letters, digits, `-` and `.`.
    case invalidHostCharacter(String)
    /// A label (between dots) that is empty, too long, starts or ends with `-`, or has `--` in positions 3–4.
    case invalidLabel(String)
    /// An `xn--` label that is not valid Punycode or not in canonical form.
    case invalidPunycode(String)
    /// A label mixing Latin with Cyrillic or Greek letters (a homograph).
    case mixedScript(String)
    /// The host is longer than 253 characters in ASCII form.
    case hostTooLong
    /// An IPv4 address not in canonical dotted-decimal form (decimal, octal or hex integers, fewer than four parts, leading zeros).
    case nonCanonicalIPv4(String)
    /// An IPv6 literal that cannot be parsed.
    case invalidIPv6(String)
    /// A page address (``Origin/init(ofURL:)``) whose host ends in a dot: in a page's address
    /// `host.` is another origin than `host`, and no site's origin is spelled so.
    case hostEndsInDot(String)
}

extension OriginError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .empty: "origin is empty; write it as scheme://host[:port], e.g. https://newsroom.sgit.ai"
        case .tooLong(let n): "origin is \(n) characters long; at most \(Origin.maximumLength) are accepted"
        case .opaqueOrigin: "the opaque origin \"null\" names no site; give the site's scheme://host[:port]"
        case .forbiddenCharacter(let s): "origin contains the forbidden character \(s) (whitespace, NUL, control characters and backslashes are refused); remove it"
        case .missingScheme: "origin has no scheme; write it as https://host[:port]"
        case .forbiddenScheme(let s): "\(s): URLs have no site origin; use the site's https:// origin"
        case .unsupportedScheme(let s): "scheme \(s) is not supported; use https (or http for loopback hosts)"
        case .insecureScheme(let host): "plain http is refused for \(host); use https (http is allowed only for localhost, 127.0.0.0/8 and [::1])"
        case .userinfoNotAllowed: "origin contains user information (user@ or user:password@); remove it"
        case .pathNotAllowed: "origin contains a path; an origin is only scheme://host[:port]"
        case .queryNotAllowed: "origin contains a ?query; an origin is only scheme://host[:port]"
        case .fragmentNotAllowed: "origin contains a #fragment; an origin is only scheme://host[:port]"
        case .emptyHost: "origin has an empty host; write scheme://host[:port]"
        case .invalidPort(let p): "port \"\(p)\" is invalid; give a decimal number from 1 to 65535 without leading zeros"
        case .percentEncodedHost: "host contains percent-encoding; write the host's characters directly"
        case .invalidHostCharacter(let s): "host contains the character \(s); hosts may contain only letters, digits, '-' and '.'"
        case .invalidLabel(let l): "host label \"\(l)\" is invalid (empty, longer than 63, leading or trailing '-', or '--' in positions 3-4)"
        case .invalidPunycode(let l): "host label \"\(l)\" is not valid canonical punycode; write the Unicode form or the correct xn-- form"
        case .mixedScript(let l): "host label \"\(l)\" mixes Latin with Cyrillic or Greek letters (a look-alike); refused"
        case .hostTooLong: "host is longer than 253 characters"
        case .nonCanonicalIPv4(let h): "IPv4 address \"\(h)\" is not in canonical dotted-decimal form; write four decimal numbers 0-255 without leading zeros (e.g. 127.0.0.1)"
        case .invalidIPv6(let h): "IPv6 literal \"\(h)\" cannot be parsed; write it in brackets, e.g. [::1]"
        case .hostEndsInDot(let h): "the address's host \"\(h)\" ends in a dot, which makes it another origin than the host without it; write the host without the dot"
        }
    }
}

/// A web origin in canonical form: scheme, host and port, the unit a site's data is bound to.
///
/// There is one parser, ``init(parsing:)``, and one canonical form, ``serialized``
/// (`scheme://host:port`, port always explicit). Two origins match only when their canonical
/// forms are equal; a subdomain is another origin.
///
/// Canonicalisation: scheme and host lower-cased; non-ASCII hosts mapped (NFKC, lower case,
/// ideographic full stops to `.`) and spelled in Punycode (`bücher.example` →
/// `xn--bcher-kva.example`); one trailing dot removed; default ports made explicit (https 443,
/// http 80); IPv6 literals in RFC 5952 form.
///
/// Refused, each with its own ``OriginError``: userinfo, paths other than a bare `/`, queries,
/// fragments, `null`, `file:`/`data:`/`blob:`/`javascript:`/`about:`, plain `http` except to
/// loopback (`localhost`, 127.0.0.0/8, `[::1]`), empty hosts, bad ports, whitespace, NUL,
/// control characters, backslashes, percent-encoding in the host, labels mixing Latin with
/// Cyrillic or Greek, and IPv4 addresses in any form other than canonical dotted decimal.
/// SiteKeep refuses (rather than canonicalises) `http://2130706433`, `http://0x7f.0.0.1`,
/// `http://0177.0.0.1` and `http://127.1`: an origin has one spelling, and a refused alias
/// can never match a site.
public struct Origin: Sendable, Hashable, CustomStringConvertible {
    /// The schemes an origin may have.
    public enum Scheme: String, Sendable, Hashable {
        case https, http
        /// The port a URL without one uses.
        public var defaultPort: UInt16 { self == .https ? 443 : 80 }
    }

    /// Inputs longer than this are refused.
    public static let maximumLength = 2048

    /// The scheme.
    public let scheme: Scheme
    /// The host in canonical ASCII form (Punycode labels, IPv6 without brackets).
    public let host: String
    /// The port, always explicit.
    public let port: UInt16
    /// Whether the host is loopback (`localhost`, 127.0.0.0/8, `::1`).
    public let isLoopback: Bool

    /// Parses and canonicalises `text`.
    /// - Throws: an ``OriginError`` naming the first problem found.
    public init(parsing text: String) throws(OriginError) {
        if text.isEmpty { throw .empty }
        if text.unicodeScalars.count > Self.maximumLength { throw .tooLong(text.unicodeScalars.count) }
        for s in text.unicodeScalars {
            if s.properties.isWhitespace || s.value < 0x20 || (0x7F...0x9F).contains(s.value)
                || s == "\\" || s.properties.generalCategory == .format {
                throw .forbiddenCharacter(String(format: "U+%04X", s.value))
            }
        }
        if text.lowercased() == "null" { throw .opaqueOrigin }

        guard let colon = text.firstIndex(of: ":") else { throw .missingScheme }
        let schemeText = text[..<colon].lowercased()
        guard let first = schemeText.unicodeScalars.first, first.value >= 0x61 && first.value <= 0x7A,
              schemeText.unicodeScalars.allSatisfy({ ($0.value >= 0x61 && $0.value <= 0x7A) || ($0.value >= 0x30 && $0.value <= 0x39) || $0 == "+" || $0 == "-" || $0 == "." })
        else { throw .missingScheme }
        switch schemeText {
        case "file", "data", "blob", "javascript", "about", "filesystem", "view-source": throw .forbiddenScheme(schemeText)
        default: break
        }
        guard let scheme = Scheme(rawValue: schemeText) else { throw .unsupportedScheme(schemeText) }
        let afterScheme = text[text.index(after: colon)...]
        guard afterScheme.hasPrefix("//") else { throw .missingScheme }
        let rest = afterScheme.dropFirst(2)
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let tail = rest[authorityEnd...]
        if authority.contains("@") { throw .userinfoNotAllowed }
        if tail.contains("#") {
            if let q = tail.firstIndex(of: "?"), let h = tail.firstIndex(of: "#"), q < h { throw .queryNotAllowed }
            throw .fragmentNotAllowed
        }
        if tail.contains("?") { throw .queryNotAllowed }
        if !(tail.isEmpty || tail == "/") { throw .pathNotAllowed }

        // Split host and port.
        var hostText: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidIPv6(String(authority)) }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            let afterClose = authority[authority.index(after: close)...]
            if !afterClose.isEmpty {
                guard afterClose.hasPrefix(":") else { throw .invalidIPv6(String(authority)) }
                portText = afterClose.dropFirst()
            }
            if hostText.contains("%") { throw .percentEncodedHost }
            let address = try IPv6.parse(String(hostText))
            self.scheme = scheme
            self.host = IPv6.canonical(address)
            self.isLoopback = address == [0, 0, 0, 0, 0, 0, 0, 1]
        } else {
            if let lastColon = authority.lastIndex(of: ":") {
                hostText = authority[..<lastColon]
                portText = authority[authority.index(after: lastColon)...]
                if hostText.contains(":") { throw .invalidIPv6(String(authority)) }
            } else {
                hostText = authority
            }
            if hostText.contains("%") { throw .percentEncodedHost }
            if hostText.isEmpty || hostText == "." { throw .emptyHost }
            if hostText.hasSuffix(".") { hostText = hostText.dropLast() }
            let canonicalHost = try Host.canonicalise(String(hostText))
            self.scheme = scheme
            self.host = canonicalHost
            self.isLoopback = canonicalHost == "localhost" || (IPv4.parseCanonical(canonicalHost)?.first == 127)
        }
        if let portText {
            guard !portText.isEmpty, portText.count <= 5,
                  portText.unicodeScalars.allSatisfy({ $0.value >= 0x30 && $0.value <= 0x39 }),
                  !(portText.count > 1 && portText.hasPrefix("0")),
                  let value = Int(portText), value >= 1, value <= 65535
            else { throw .invalidPort(String(portText)) }
            self.port = UInt16(value)
        } else {
            self.port = scheme.defaultPort
        }
        if scheme == .http && !isLoopback { throw .insecureScheme(host: host) }
    }

    /// The canonical form, `scheme://host:port` (IPv6 hosts in brackets).
    public var serialized: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme.rawValue)://\(h):\(port)"
    }

    public var description: String { serialized }

    /// `scheme://host[:port]` as a page's `location.origin` gives it and as people type it: the
    /// scheme's default port left out (``serialized`` always writes it). The one short form of
    /// an origin (the browser's page origins, the bridge's refusals).
    public var pageForm: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == scheme.defaultPort ? "\(scheme.rawValue)://\(h)" : "\(scheme.rawValue)://\(h):\(port)"
    }
}

/// Host canonicalisation: IPv4 check, UTS 46 basics, Punycode.
enum Host {
    static func canonicalise(_ raw: String) throws(OriginError) -> String {
        // UTS 46 mapping basics: NFKC, lower case, ideographic full stops to '.'.
        var mapped = raw.precomposedStringWithCompatibilityMapping.lowercased()
        mapped = mapped.replacingOccurrences(of: "\u{3002}", with: ".")
            .replacingOccurrences(of: "\u{FF0E}", with: ".")
            .replacingOccurrences(of: "\u{FF61}", with: ".")
        mapped = mapped.precomposedStringWithCanonicalMapping
        if mapped.hasSuffix(".") { mapped.removeLast() }
        if mapped.isEmpty { throw .emptyHost }

        // Anything that ends in a number is an IPv4 address (as WHATWG decides), and must be canonical.
        let labels = mapped.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if let last = labels.last, Self.looksNumeric(last) {
            guard IPv4.parseCanonical(mapped) != nil else { throw .nonCanonicalIPv4(mapped) }
            return mapped
        }

        var out: [String] = []
        for label in labels {
            out.append(try canonicaliseLabel(label))
        }
        let host = out.joined(separator: ".")
        if host.utf8.count > 253 { throw .hostTooLong }
        return host
    }

    /// A label is numeric when it is all decimal digits, or `0x`/`0X` followed by hex digits.
    static func looksNumeric(_ label: String) -> Bool {
        if label.isEmpty { return false }
        if label.unicodeScalars.allSatisfy({ $0.value >= 0x30 && $0.value <= 0x39 }) { return true }
        if label.hasPrefix("0x") {
            return label.dropFirst(2).unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit })
        }
        return false
    }

    static func isLDH(_ s: Unicode.Scalar) -> Bool {
        (s.value >= 0x61 && s.value <= 0x7A) || (s.value >= 0x30 && s.value <= 0x39) || s == "-"
    }

    static func canonicaliseLabel(_ label: String) throws(OriginError) -> String {
        if label.isEmpty { throw .invalidLabel(label) }
        let scalars = Array(label.unicodeScalars)
        let ascii: String
        if scalars.allSatisfy({ $0.isASCII }) {
            for s in scalars where !isLDH(s) { throw .invalidHostCharacter("'\(Character(s))'") }
            if label.hasPrefix("xn--") {
                // An A-label: must decode, contain non-ASCII, be mapped already and re-encode to itself.
                guard let decoded = Punycode.decode(String(label.dropFirst(4))),
                      decoded.contains(where: { !$0.isASCII }),
                      let reencoded = Punycode.encode(decoded), "xn--" + reencoded == label
                else { throw .invalidPunycode(label) }
                var u = String.UnicodeScalarView(); u.append(contentsOf: decoded)
                let decodedString = String(u)
                guard decodedString.precomposedStringWithCompatibilityMapping.lowercased().precomposedStringWithCanonicalMapping == decodedString
                else { throw .invalidPunycode(label) }
                try checkUnicodeLabel(decoded, original: label)
                ascii = label
            } else {
                ascii = label
            }
        } else {
            try checkUnicodeLabel(scalars, original: label)
            guard let encoded = Punycode.encode(scalars) else { throw .invalidPunycode(label) }
            ascii = "xn--" + encoded
        }
        if ascii.utf8.count > 63 || ascii.hasPrefix("-") || ascii.hasSuffix("-") { throw .invalidLabel(label) }
        if !ascii.hasPrefix("xn--"), ascii.count >= 4,
           Array(ascii.utf8)[2] == UInt8(ascii: "-"), Array(ascii.utf8)[3] == UInt8(ascii: "-") {
            throw .invalidLabel(label)
        }
        return ascii
    }

    private enum Script { case latin, cyrillic, greek, other }

    private static func script(of s: Unicode.Scalar) -> Script? {
        let v = s.value
        switch v {
        case 0x61...0x7A, 0xC0...0x24F, 0x1E00...0x1EFF: return .latin
        case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F: return .cyrillic
        case 0x370...0x3FF, 0x1F00...0x1FFF: return .greek
        default: return s.properties.isAlphabetic ? .other : nil
        }
    }

    /// Refuses scalars UTS 46 would disallow that we cannot map, and Latin mixed with Cyrillic or Greek.
    static func checkUnicodeLabel(_ scalars: [Unicode.Scalar], original: String) throws(OriginError) {
        var scripts = Set<Script>()
        for s in scalars {
            if s.isASCII {
                if !isLDH(s) { throw .invalidHostCharacter("'\(Character(s))'") }
            } else {
                switch s.properties.generalCategory {
                case .lowercaseLetter, .otherLetter, .modifierLetter, .nonspacingMark, .spacingMark,
                     .enclosingMark, .decimalNumber:
                    break
                default:
                    throw .invalidHostCharacter(String(format: "U+%04X", s.value))
                }
                if s.properties.changesWhenNFKCCaseFolded { throw .invalidHostCharacter(String(format: "U+%04X", s.value)) }
            }
            if let sc = script(of: s), s.properties.isAlphabetic { scripts.insert(sc) }
        }
        if scripts.contains(.latin) && (scripts.contains(.cyrillic) || scripts.contains(.greek)) {
            throw .mixedScript(original)
        }
        if scripts.contains(.cyrillic) && scripts.contains(.greek) { throw .mixedScript(original) }
    }
}

enum IPv4 {
    /// Four decimal parts 0–255 without leading zeros, or nil.
    static func parseCanonical(_ s: String) -> [UInt8]? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for p in parts {
            guard !p.isEmpty, p.count <= 3, p.unicodeScalars.allSatisfy({ $0.value >= 0x30 && $0.value <= 0x39 }),
                  !(p.count > 1 && p.hasPrefix("0")), let v = Int(p), v <= 255 else { return nil }
            out.append(UInt8(v))
        }
        return out
    }
}

enum IPv6 {
    /// Parses an IPv6 literal (without brackets) into eight groups; accepts `::` and a dotted-quad tail.
    static func parse(_ s: String) throws(OriginError) -> [UInt16] {
        let bad = OriginError.invalidIPv6(s)
        if s.isEmpty || s.count > 45 { throw bad }
        var text = s.lowercased()
        var tail: [UInt16] = []
        if let lastColon = text.lastIndex(of: ":"), text[text.index(after: lastColon)...].contains(".") {
            guard let v4 = IPv4.parseCanonical(String(text[text.index(after: lastColon)...])) else { throw bad }
            tail = [UInt16(v4[0]) << 8 | UInt16(v4[1]), UInt16(v4[2]) << 8 | UInt16(v4[3])]
            text = String(text[...lastColon])
            if text.hasSuffix(":") && !text.hasSuffix("::") { text.removeLast() }
        }
        func groups(_ part: Substring) throws(OriginError) -> [UInt16] {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            for g in part.split(separator: ":", omittingEmptySubsequences: false) {
                guard !g.isEmpty, g.count <= 4, g.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit }),
                      let v = UInt16(g, radix: 16) else { throw bad }
                out.append(v)
            }
            return out
        }
        var result: [UInt16]
        if let range = text.range(of: "::") {
            let head = try groups(text[..<range.lowerBound])
            let rest = text[range.upperBound...]
            if rest.contains("::") { throw bad }
            let back = try groups(rest) + tail
            guard head.count + back.count <= 7 else { throw bad }
            result = head + Array(repeating: 0, count: 8 - head.count - back.count) + back
        } else {
            result = try groups(Substring(text)) + tail
            guard result.count == 8 else { throw bad }
        }
        return result
    }

    /// RFC 5952: lower-case hex, no leading zeros, the longest run (≥ 2) of zero groups as `::`.
    static func canonical(_ g: [UInt16]) -> String {
        var bestStart = -1, bestLen = 0, i = 0
        while i < g.count {
            if g[i] == 0 {
                var j = i
                while j < g.count && g[j] == 0 { j += 1 }
                if j - i > bestLen && j - i >= 2 { bestStart = i; bestLen = j - i }
                i = j
            } else { i += 1 }
        }
        let hex = g.map { String($0, radix: 16) }
        if bestStart < 0 { return hex.joined(separator: ":") }
        let head = hex[..<bestStart].joined(separator: ":")
        let tail = hex[(bestStart + bestLen)...].joined(separator: ":")
        return head + "::" + tail
    }
}
