import Glibc

/// RFC 7468 PEM text: one labelled block of base64.
package enum PEM {
    /// Encodes DER as a PEM block, 64 characters a line (or `lineLength`: OpenSSH's armour
    /// uses 70), every line ending in `\n`.
    package static func encode(_ der: [UInt8], label: String, lineLength: Int = 64) -> String {
        let b64 = Array(Base64.encode(der).utf8)
        var text = "-----BEGIN \(label)-----\n"
        var i = 0
        while i < b64.count {
            let end = min(i + lineLength, b64.count)
            text += String(decoding: b64[i..<end], as: UTF8.self) + "\n"
            i = end
        }
        return text + "-----END \(label)-----\n"
    }

    /// Decodes the first block with the given label from PEM text.
    package static func decode(_ text: String, label: String) throws(CryptoError) -> [UInt8] {
        let result: Result<[UInt8], CryptoError> = Array(text.utf8).withUnsafeBytes { raw in
            Result { () throws(CryptoError) -> [UInt8] in try decode(raw, label: label) }
        }
        return try result.get()
    }

    /// Decodes from raw bytes, so secret PEM text need not become a `String`.
    package static func decode(_ bytes: UnsafeRawBufferPointer, label: String) throws(CryptoError) -> [UInt8] {
        guard bytes.count < 64 * 1024 else { throw .invalidKeyEncoding("PEM text too long") }
        let begin = Array("-----BEGIN \(label)-----".utf8), end = Array("-----END \(label)-----".utf8)
        let all = Array(bytes)
        guard let b = find(begin, in: all, from: 0), let e = find(end, in: all, from: b + begin.count) else {
            throw .invalidKeyEncoding("no '-----BEGIN \(label)-----' block")
        }
        var body = all[(b + begin.count)..<e].filter { $0 != 0x0a && $0 != 0x0d && $0 != 0x20 && $0 != 0x09 }
        defer { body.withUnsafeMutableBytes { if let p = $0.baseAddress { explicit_bzero(p, $0.count) } } }   // what SecureMemory.zero does on glibc
        guard let der = try? Base64.decode(String(decoding: body, as: UTF8.self)) else {
            throw .invalidKeyEncoding("PEM body is not base64")
        }
        return der
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for i in start...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) {
            return i
        }
        return nil
    }
}
