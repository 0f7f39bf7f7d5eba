import Glibc
import SiteKeepCrypto

// The leak scan's forms, shared by the custody suite's key-leak tests and the adversarial
// suite's whole-session scan.

/// The forms a leaked secret could take: raw, hex (both cases), and standard and URL-safe
/// base64 at every alignment (a secret inside a longer blob is encoded shifted, so only the
/// groups that depend on the secret's bytes alone are kept).
public func leakForms(of secret: [UInt8]) -> [[UInt8]] {
    var forms: [[UInt8]] = [secret, Array(Hex.encode(secret).utf8), Array(Hex.encode(secret).uppercased().utf8)]
    for variant in [Base64.Variant.standard, .urlSafeNoPadding] {
        for shift in 0..<3 {
            let text = Array(Base64.encode([UInt8](repeating: 0, count: shift) + secret + [0, 0, 0], variant: variant).utf8)
            let start = shift == 0 ? 0 : 4
            let end = text.count - 8
            if end - start >= 8 { forms.append(Array(text[start..<end])) }
        }
    }
    return forms
}

/// Whether `needle` (at least 8 bytes: shorter forms would match by chance) occurs in `haystack`.
public func occurs(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
    guard needle.count >= 8, haystack.count >= needle.count else { return false }
    let first = needle[0]
    var i = 0
    let last = haystack.count - needle.count
    return haystack.withUnsafeBufferPointer { h in
        needle.withUnsafeBufferPointer { n in
            while i <= last {
                if h[i] == first, memcmp(h.baseAddress! + i, n.baseAddress!, n.count) == 0 { return true }
                i += 1
            }
            return false
        }
    }
}
