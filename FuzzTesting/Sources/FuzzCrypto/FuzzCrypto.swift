import SiteKeepCrypto

/// libFuzzer entry point. The first byte picks the parser, the rest is its input. Every
/// parser must return or throw a `CryptoError` for any bytes: a crash, hang, or sanitizer
/// report is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCrypto(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let selector = data[0]
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: input, as: UTF8.self)
    switch selector % 10 {
    case 0:
        if let key = try? P256.Signing.PublicKey(pemRepresentation: text) {
            // A key that parses must re-encode and re-parse to itself.
            guard (try? P256.Signing.PublicKey(pemRepresentation: key.pemRepresentation)) == key else { trap("PEM round trip") }
        }
    case 1:
        if let key = try? P256.Signing.PublicKey(derRepresentation: input) {
            guard key.derRepresentation == input else { trap("SPKI DER round trip") }
        }
    case 2:
        if let sig = try? P256.Signing.Signature(derRepresentation: input) {
            // Strict DER: only the canonical encoding parses.
            guard sig.derRepresentation == input else { trap("signature DER not canonical") }
        }
    case 3:
        if let sig = try? P256.Signing.Signature(rawRepresentation: input),
           let key = try? P256.Signing.PrivateKey() {
            _ = key.publicKey.isValidSignature(sig, for: input)
        }
    case 4:
        if let secret = try? SecretBytes(copying: input) {
            _ = try? P256.Signing.PrivateKey(pkcs8: secret)
        }
    case 5:
        let decoded = try? Base64.decode(text, variant: .standard)
        if let bytes = decoded {
            guard Base64.encode(bytes, variant: .standard) == text else { trap("base64 not canonical") }
        }
        // The bridge's schema check must accept exactly what the decoder accepts.
        guard Base64.isValid(text, variant: .standard) == (decoded != nil) else { trap("Base64.isValid disagrees with decode") }
    case 6:
        let decoded = try? Base64.decode(text, variant: .urlSafeNoPadding)
        if let bytes = decoded {
            guard Base64.encode(bytes, variant: .urlSafeNoPadding) == text else { trap("base64url not canonical") }
        }
        guard Base64.isValid(text, variant: .urlSafeNoPadding) == (decoded != nil) else { trap("Base64.isValid (url) disagrees with decode") }
    case 7:
        if let bytes = try? Hex.decode(text) {
            guard Hex.encode(bytes) == text.lowercased() else { trap("hex round trip") }
        }
    case 8:
        if let bytes = try? Zlib.decompress(input, limit: 1 << 20) {
            guard bytes.count <= 1 << 20 else { trap("zlib limit ignored") }
        }
    default:
        if let key = try? P256.Signing.PublicKey(pemRepresentation: text),
           let sig = try? P256.Signing.Signature(derRepresentation: input) {
            _ = key.isValidSignature(sig, for: input)
        }
    }
    return 0
}

/// A broken invariant: stop so libFuzzer records the input.
func trap(_ what: StaticString) -> Never {
    fatalError("FuzzCrypto invariant broken: \(what)")
}
