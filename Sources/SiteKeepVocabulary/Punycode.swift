/// Punycode (RFC 3492), the Bootstring profile IDNA uses to spell non-ASCII labels in ASCII.
///
/// An encoding, not cryptography: `encode` turns the scalars of one label into its basic form
/// (without the `xn--` prefix), `decode` reverses it. Both refuse input that would overflow.
package enum Punycode {
    private static let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700
    private static let initialBias = 72, initialN = 0x80

    private static func adapt(_ deltaIn: Int, _ numPoints: Int, _ firstTime: Bool) -> Int {
        var delta = firstTime ? deltaIn / damp : deltaIn / 2
        delta += delta / numPoints
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (((base - tMin + 1) * delta) / (delta + skew))
    }

    private static func digit(_ d: Int) -> Character {
        // 0..25 → a..z, 26..35 → 0..9
        Character(Unicode.Scalar(UInt8(d < 26 ? 97 + d : 22 + d)))
    }

    private static func value(of c: Unicode.Scalar) -> Int? {
        switch c.value {
        case 0x30...0x39: Int(c.value) - 22
        case 0x41...0x5A: Int(c.value) - 0x41
        case 0x61...0x7A: Int(c.value) - 0x61
        default: nil
        }
    }

    /// The Punycode form of `input`, or nil on overflow.
    package static func encode(_ input: [Unicode.Scalar]) -> String? {
        var output = ""
        let codePoints = input.map { Int($0.value) }
        for c in codePoints where c < 0x80 { output.append(Character(Unicode.Scalar(UInt8(c)))) }
        let basicCount = output.count
        var handled = basicCount
        if basicCount > 0 { output.append("-") }
        var n = initialN, delta = 0, bias = initialBias
        while handled < codePoints.count {
            guard let m = codePoints.filter({ $0 >= n }).min() else { return nil }
            let (mul, o1) = (m - n).multipliedReportingOverflow(by: handled + 1)
            guard !o1 else { return nil }
            let (d2, o2) = delta.addingReportingOverflow(mul)
            guard !o2 else { return nil }
            delta = d2
            n = m
            for c in codePoints {
                if c < n {
                    delta += 1
                    if delta == Int.max { return nil }
                }
                if c == n {
                    var q = delta
                    var k = base
                    while true {
                        let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                        if q < t { break }
                        output.append(digit(t + (q - t) % (base - t)))
                        q = (q - t) / (base - t)
                        k += base
                    }
                    output.append(digit(q))
                    bias = adapt(delta, handled + 1, handled == basicCount)
                    delta = 0
                    handled += 1
                }
            }
            delta += 1
            n += 1
        }
        return output
    }

    /// The scalars `input` (the part after `xn--`) encodes, or nil when it is not valid Punycode.
    package static func decode(_ input: String) -> [Unicode.Scalar]? {
        let scalars = Array(input.unicodeScalars)
        guard scalars.allSatisfy({ $0.isASCII }) else { return nil }
        var output: [Unicode.Scalar] = []
        var start = 0
        if let lastDash = scalars.lastIndex(of: "-") {
            output = Array(scalars[..<lastDash])
            start = lastDash + 1
        }
        var n = initialN, i = 0, bias = initialBias
        var pos = start
        while pos < scalars.count {
            let oldi = i
            var w = 1
            var k = base
            while true {
                guard pos < scalars.count, let d = value(of: scalars[pos]) else { return nil }
                pos += 1
                let (dw, o1) = d.multipliedReportingOverflow(by: w)
                guard !o1 else { return nil }
                let (ni, o2) = i.addingReportingOverflow(dw)
                guard !o2, ni < 0x7FFF_FFFF else { return nil }
                i = ni
                let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                if d < t { break }
                let (nw, o3) = w.multipliedReportingOverflow(by: base - t)
                guard !o3, nw < 0x7FFF_FFFF else { return nil }
                w = nw
                k += base
            }
            let count = output.count + 1
            bias = adapt(i - oldi, count, oldi == 0)
            n += i / count
            i %= count
            guard n <= 0x10FFFF, let scalar = Unicode.Scalar(UInt32(n)) else { return nil }
            output.insert(scalar, at: i)
            i += 1
        }
        return output
    }
}
