import SiteKeepCrypto
import SiteKeepCustody

/// libFuzzer entry point: team key `#key=` links (`TeamKeyMaterial.webLink`) and key files
/// (`TeamKeyMaterial.detect`). The first byte picks the parser. Either returns key material of
/// the right size or throws a `CustodyError` whose message never quotes the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeyLink(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        let text = String(decoding: input, as: UTF8.self)
        do {
            let material = try TeamKeyMaterial.webLink(text)
            check(material)
            // A link that parses has its key in the fragment, never the query.
            guard let hash = text.firstIndex(of: "#"), text[hash...].contains("key=") else { trap("key outside the fragment accepted") }
        } catch {
            checkQuiet(error, input: input)
        }
    } else {
        guard let secret = try? SecretBytes(copying: input) else { return 0 }
        do {
            check(try TeamKeyMaterial.detect(secret))
        } catch {
            checkQuiet(error, input: input)
        }
    }
    return 0
}

func check(_ material: consuming TeamKeyMaterial) {
    switch consume material {
    case .ed25519Seed(let seed):
        guard seed.count == 32 else { trap("an Ed25519 seed that is not 32 bytes") }
        guard (try? Ed25519.PrivateKey(seed: seed)) != nil else { trap("a detected seed makes no key") }
    case .p256PKCS8(let der):
        // Detection only recognises the form; the P-256 parser judges it (must not crash).
        _ = try? P256.Signing.PrivateKey(pkcs8: der)
    case .p256Scalar(let scalar):
        // From an OpenSSH key file: always 32 bytes; the curve judges the value (must not crash).
        guard scalar.count == 32 else { trap("a P-256 scalar that is not 32 bytes") }
        _ = try? P256.Signing.PrivateKey(rawScalar: scalar)
    }
}

/// Errors never quote the input: no 16-byte run of it (that is not plain words) appears in
/// the message.
func checkQuiet(_ error: CustodyError, input: [UInt8]) {
    let message = Array("\(error)".utf8)
    guard input.count >= 16, message.count >= 16 else { return }
    let keyish = input.filter { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2d || $0 == 0x5f }
    guard keyish.count >= 16 else { return }
    var i = 0
    while i + 16 <= input.count {
        let window = Array(input[i..<(i + 16)])
        if window.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) }),
           Set(window).count >= 8, contains(message, window) {
            trap("error message quotes the key input")
        }
        i += 1
    }
}

func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
    guard hay.count >= needle.count else { return false }
    for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return true }
    return false
}

/// A broken invariant: stop so libFuzzer records the input.
func trap(_ what: StaticString) -> Never {
    fatalError("FuzzKeyLink invariant broken: \(what)")
}
