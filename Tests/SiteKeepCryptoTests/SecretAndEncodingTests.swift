import CSodium
import Foundation
import Testing
@testable import SiteKeepCrypto
import SiteKeepHardening
import SiteKeepTestSupport

@Suite struct SecretBytesTests {
    @Test func randomSecretsDifferAndHaveTheirCount() throws {
        let a = try SecretBytes(randomCount: 32)
        let b = try SecretBytes(randomCount: 32)
        #expect(a.count == 32)
        let same = a.constantTimeEquals(b)
        #expect(!same)
        #expect(bytes(of: a) != [UInt8](repeating: 0, count: 32))
        #expect(throws: CryptoError.self) { _ = try SecretBytes(randomCount: 0) }
    }

    @Test func copyingKeepsTheBytesAndLeavesTheSource() throws {
        let source: [UInt8] = [1, 2, 3, 4, 5]
        let s = try SecretBytes(copying: source)
        #expect(bytes(of: s) == source)
        #expect(source == [1, 2, 3, 4, 5])
        #expect(throws: CryptoError.self) { _ = try SecretBytes(copying: [UInt8]()) }
    }

    @Test func consumingZeroesTheSource() throws {
        var source: [UInt8] = [9, 8, 7]
        let s = try SecretBytes(consumingAndZeroing: &source)
        #expect(source == [0, 0, 0])
        #expect(bytes(of: s) == [9, 8, 7])
    }

    @Test func constantTimeComparison() throws {
        let a = try SecretBytes(copying: [1, 2, 3])
        let b = try SecretBytes(copying: [1, 2, 3])
        let c = try SecretBytes(copying: [1, 2, 4])
        let d = try SecretBytes(copying: [1, 2, 3, 4])
        let ab = a.constantTimeEquals(b), ac = a.constantTimeEquals(c), ad = a.constantTimeEquals(d)
        let withArray = a.constantTimeEquals([1, 2, 3]), withShort = a.constantTimeEquals([1, 2])
        #expect(ab)
        #expect(!ac)
        #expect(!ad)
        #expect(withArray)
        #expect(!withShort)
        #expect(ConstantTime.equals([1, 2], [1, 2]))
        #expect(!ConstantTime.equals([1, 2], [1, 3]))
        #expect(!ConstantTime.equals([1, 2], [1]))
        #expect(ConstantTime.equals([], []))
    }

    @Test func duplicateIsAnIndependentEqualCopy() throws {
        let a = try SecretBytes(copying: [5, 6, 7])
        let b = try a.duplicate()
        let same = a.constantTimeEquals(b)
        #expect(same)
        #expect(b.count == 3)
        #expect(bytes(of: b) == [5, 6, 7])
    }

    @Test func wipingOrdinaryBuffers() {
        var buffer: [UInt8] = [1, 2, 3]
        SecureMemory.zero(&buffer)
        #expect(buffer == [0, 0, 0])
        var empty: [UInt8] = []
        SecureMemory.zero(&empty)
        #expect(empty.isEmpty)
    }

    /// The guarded page is PROT_NONE outside `withUnsafeBytes`: reading it through an escaped
    /// pointer must kill the process (SIGSEGV; ASan turns that into exit 1, hence `.failure`).
    @Test func readingOutsideTheScopeKillsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let s = try SecretBytes(copying: [0x42, 0x43])
            let escaped = s.withUnsafeBytes { UnsafeRawPointer($0.baseAddress!) }
            let value = escaped.load(as: UInt8.self)
            // Not reached: print so the optimiser keeps the load.
            print(value)
        }
    }

    /// Control for the test above: the same read inside the scope succeeds in a child process.
    @Test func readingInsideTheScopeIsFine() async {
        await #expect(processExitsWith: .success) {
            let s = try SecretBytes(copying: [0x42, 0x43])
            let value = s.withUnsafeBytes { $0.load(as: UInt8.self) }
            if value != 0x42 { exit(2) }
        }
    }
}

@Suite struct ProcessHardeningTests {
    /// Run in a child process: hardening cannot be undone, and the test runner must stay dumpable.
    @Test func applyLeavesTheProcessNonDumpableWithoutCoreDumps() async {
        await #expect(processExitsWith: .success) {
            let report = try ProcessHardening.apply()
            var limit = rlimit()
            _ = getrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
            // Read the flag independently of SiteKeepHardening: prctl(PR_GET_DUMPABLE = 3).
            typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
            guard let sym = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl") else { exit(5) }
            let dumpable = unsafeBitCast(sym, to: Prctl.self)(3, 0, 0, 0, 0)
            guard !report.dumpable, report.coreDumpsDisabled, report.sodiumReady,
                  limit.rlim_cur == 0, limit.rlim_max == 0, dumpable == 0 else { exit(3) }
            // Idempotent.
            let again = try ProcessHardening.apply()
            guard again == report else { exit(4) }
        }
    }
}

@Suite struct EncodingStrictnessTests {
    /// `Base64.isValid` (the bridge's schema check) must agree with `Base64.decode` (libsodium)
    /// on every text: valid encodings of every length, and mutations of them (each alphabet of
    /// the other variant, padding added, removed or moved, trailing bits set, non-ASCII, space).
    @Test func base64ValidityAgreesWithDecoding() throws {
        var texts: [String] = ["", "=", "==", "A", "AA", "AA=", "AA==", "AA===", "AAA", "AAA=", "AAAA", "AAAA=",
                               "AB==", "AAB=", "+/==", "-_==", "+/8=", "-_8", "A===", "=AAA", "AA==AA==", "\u{FFFD}",
                               "AAAA\u{0}", " AAAA", "AAAA ", "AA\nAA", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmE"]
        var generator = SystemRandomNumberGenerator()
        let mutations: [(inout [UInt8], inout SystemRandomNumberGenerator) -> Void] = [
            { b, g in if !b.isEmpty { b[Int.random(in: 0..<b.count, using: &g)] = [0x2b, 0x2f, 0x2d, 0x5f, 0x3d, 0x20, 0xc3][Int.random(in: 0..<7, using: &g)] } },
            { b, _ in b.append(0x3d) },
            { b, _ in if !b.isEmpty { b.removeLast() } },
            { b, g in if !b.isEmpty { b.insert(0x3d, at: Int.random(in: 0..<b.count, using: &g)) } },
            { b, g in if let i = b.lastIndex(where: { $0 != 0x3d }) { b[i] = [0x42, 0x43, 0x51, 0x67, 0x2f][Int.random(in: 0..<5, using: &g)] } },
        ]
        for length in Array(0..<40) + [63, 64, 65, 95, 96, 97, 4096] {
            for variant in [Base64.Variant.standard, .urlSafe, .urlSafeNoPadding] {
                let valid = Base64.encode((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }, variant: variant)
                texts.append(valid)
                for mutate in mutations {
                    var bytes = Array(valid.utf8)
                    mutate(&bytes, &generator)
                    texts.append(String(decoding: bytes, as: UTF8.self))
                }
            }
        }
        var accepted = 0
        for text in texts {
            for variant in [Base64.Variant.standard, .urlSafe, .urlSafeNoPadding] {
                let decoded = try? Base64.decode(text, variant: variant)
                let decodes = decoded != nil
                #expect(Base64.isValid(text, variant: variant) == decodes, "\(variant) \(Array(text.utf8))")
                // The Swift decoder answers exactly what libsodium answers: the same bytes, or a refusal.
                #expect(decoded == Self.sodiumDecode(text, variant: variant), "\(variant) \(Array(text.utf8))")
                if decodes { accepted += 1 }
            }
        }
        #expect(accepted > 100 && accepted < texts.count * 3)   // both answers were exercised
    }

    /// libsodium's `sodium_base642bin` (no ignored characters, the whole text consumed), as
    /// `Base64.decode` called it before it was written in Swift; nil for a refusal. Bytes of
    /// 0x80 and above are refused first, as `Base64.decode` does (libsodium 1.0.18 takes them
    /// for digits).
    static func sodiumDecode(_ text: String, variant: Base64.Variant) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard !chars.isEmpty else { return [] }
        guard chars.allSatisfy({ $0 < 0x80 }) else { return nil }
        var out = [UInt8](repeating: 0, count: chars.count * 3 / 4 + 3)
        var written = 0
        var end: UnsafePointer<CChar>? = nil
        let sodiumVariant = variant.sodium
        let (rc, consumed) = chars.withUnsafeBufferPointer { src in
            src.withMemoryRebound(to: CChar.self) { c -> (Int32, Int) in
                let rc = sodium_base642bin(&out, out.count, c.baseAddress, c.count, nil, &written, &end, sodiumVariant)
                return (rc, end.map { c.baseAddress!.distance(to: $0) } ?? c.count)
            }
        }
        guard rc == 0, consumed == chars.count else { return nil }
        return Array(out.prefix(written))
    }

    @Test func hexRoundTripAndRefusals() throws {
        #expect(Hex.encode([0x00, 0xab, 0xff]) == "00abff")
        #expect(try Hex.decode("00ABff") == [0x00, 0xab, 0xff])
        #expect(try Hex.decode("") == [])
        for bad in ["0", "abc", "zz", "0g", "00 11", "00-1", " 00", "00\n", "0x00", "ab\u{0}0", "\u{FFFD}\u{FFFD}", "ab\u{00E9}"] {
            #expect(throws: CryptoError.self, "\(bad.debugDescription)") { try Hex.decode(bad) }
        }
    }

    /// Hex is written in Swift (SiteKeepEncoding, below libsodium) with `sodium_bin2hex` /
    /// `sodium_hex2bin`'s constant-time rule: it must write and accept exactly what libsodium
    /// does, for every byte value and every pair of characters.
    @Test func hexMatchesLibsodium() throws {
        func sodiumEncode(_ bytes: [UInt8]) -> String {
            var out = [CChar](repeating: 0, count: bytes.count * 2 + 1)
            _ = sodium_bin2hex(&out, out.count, bytes, bytes.count)
            return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        func sodiumDecode(_ chars: [UInt8]) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: chars.count / 2)
            var written = 0
            var end: UnsafePointer<CChar>? = nil
            let rc = chars.withUnsafeBufferPointer { src in
                src.withMemoryRebound(to: CChar.self) { c in sodium_hex2bin(&out, out.count, c.baseAddress, c.count, nil, &written, &end) }
            }
            return rc == 0 && written == out.count ? out : nil
        }
        let all = Array(UInt8.min...UInt8.max)
        #expect(Hex.encode(all) == sodiumEncode(all))
        for a in UInt8.min...UInt8.max {
            for b in UInt8.min...UInt8.max {
                let pair = [a, b]
                #expect((try? Hex.decode(String(decoding: pair, as: UTF8.self))) == (String(validating: pair, as: UTF8.self) == nil ? nil : sodiumDecode(pair)),
                        "\(pair)")
            }
        }
    }

    @Test func base64RoundTrips() throws {
        for n in 0..<20 {
            let data = SecureRandom.bytes(count: n)
            for variant in [Base64.Variant.standard, .urlSafe, .urlSafeNoPadding] {
                #expect(try Base64.decode(Base64.encode(data, variant: variant), variant: variant) == data)
            }
        }
        #expect(Base64.encode(Array("hello?>".utf8)) == "aGVsbG8/Pg==")
        #expect(Base64.encode(Array("hello?>".utf8), variant: .urlSafeNoPadding) == "aGVsbG8_Pg")
        #expect(Base64.encode(Array("hello?>".utf8), variant: .urlSafe) == "aGVsbG8_Pg==")
    }

    /// The Swift encoder must write exactly what libsodium's `sodium_bin2base64` writes, for
    /// every variant and every length class, and RFC 4648 §10's vectors.
    @Test func base64EncodingMatchesLibsodiumAndRFC4648() throws {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.encode(Array(plain.utf8), variant: .urlSafeNoPadding) == encoded.replacingOccurrences(of: "=", with: ""))
        }
        func sodium(_ bytes: [UInt8], _ variant: Base64.Variant) -> String {
            let length = sodium_base64_encoded_len(bytes.count, variant.sodium)
            var out = [CChar](repeating: 0, count: length)
            _ = sodium_bin2base64(&out, length, bytes, bytes.count, variant.sodium)
            return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        var generator = SystemRandomNumberGenerator()
        // Every byte value in every position of a group, so every digit of both alphabets is written.
        var inputs: [[UInt8]] = [Array(0...255), Array(1...255) + [0], Array(2...255) + [0, 1], [UInt8](repeating: 0xff, count: 48)]
        for length in Array(0...300) + [1023, 4095, 4096, 4097, 65_537] {
            inputs.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        for bytes in inputs {
            for variant in [Base64.Variant.standard, .urlSafe, .urlSafeNoPadding] {
                #expect(Base64.encode(bytes, variant: variant) == sodium(bytes, variant), "\(variant), \(bytes.count) bytes")
            }
        }
    }

    @Test func base64Refusals() throws {
        let standard: [String] = [
            "aGVsbG8/Pg",      // missing padding
            "aGVsbG8/Pg=",     // short padding
            "aGVsbG8/Pg===",   // extra padding
            "aGVsbG8_Pg==",    // url-safe alphabet in standard
            "aGVs bG8/Pg==",   // whitespace
            "aGVsbG8/Pg==x",   // trailing garbage
            "aGVsbG8/Pg==\n",  // trailing newline
            "aGVsbG8/Ph==",    // non-zero padding bits
            "*GVsbG8/Pg==",    // bad character
            "=",
        ]
        for bad in standard {
            #expect(throws: CryptoError.self, "\(bad.debugDescription)") { try Base64.decode(bad) }
        }
        // Non-ASCII bytes (libsodium 1.0.18 alone accepts them: regression found by FuzzCrypto).
        for bad in ["\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}", "QUJD\u{00E9}", "\u{00FF}\u{00FF}\u{00FF}\u{00FF}", "QQ==\u{0080}"] {
            for variant in [Base64.Variant.standard, .urlSafe, .urlSafeNoPadding] {
                #expect(throws: CryptoError.self, "\(bad.debugDescription)") { try Base64.decode(bad, variant: variant) }
            }
        }
        let urlNoPad: [String] = ["aGVsbG8/Pg", "aGVsbG8_Pg==", "aGVsbG8_Pg!", "aGVsbG8_Ph", "a"]
        for bad in urlNoPad {
            #expect(throws: CryptoError.self, "\(bad.debugDescription)") { try Base64.decode(bad, variant: .urlSafeNoPadding) }
        }
    }
}

@Suite struct ZlibTests {
    @Test func roundTrip() throws {
        for data in [[UInt8](), [1], Array("hello hello hello hello".utf8), SecureRandom.bytes(count: 100_000), [UInt8](repeating: 7, count: 1 << 20)] {
            let packed = try Zlib.compress(data)
            #expect(try Zlib.decompress(packed, limit: data.count) == data)
        }
    }

    @Test func bombLimit() throws {
        let big = [UInt8](repeating: 0, count: 4 << 20)
        let packed = try Zlib.compress(big, level: 9)
        #expect(packed.count < 10_000)
        #expect(throws: CryptoError.self) { try Zlib.decompress(packed, limit: big.count - 1) }
        #expect(throws: CryptoError.self) { try Zlib.decompress(packed, limit: 1024) }
        #expect(try Zlib.decompress(packed, limit: big.count).count == big.count)
    }

    @Test func truncatedAndTrailingAndCorrupt() throws {
        let data = Array(String(repeating: "SiteKeep ", count: 500).utf8)
        let packed = try Zlib.compress(data)
        #expect(throws: CryptoError.self) { try Zlib.decompress(Array(packed.dropLast()), limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress(Array(packed.prefix(packed.count / 2)), limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress(packed + [0], limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress(packed + packed, limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress(flipped(packed, at: packed.count - 1), limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress([0x78], limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress([], limit: 1 << 20) }
        #expect(throws: CryptoError.self) { try Zlib.decompress([0x00, 0x01, 0x02, 0x03], limit: 1 << 20) }
    }
}

/// The one rule for a passkey's PRF output given as bytes (`--prf-file`, the one-shot reader).
@Suite struct PRFOutputTests {
    static func decode(_ bytes: [UInt8]) throws -> [UInt8]? {
        try bytes.withUnsafeBytes { raw in try PRFOutput.decode(raw)?.withUnsafeBytes { Array($0) } }
    }

    @Test func rawBytesAndHexWithOneLineEndingAreTheOutput() throws {
        let raw: [UInt8] = (0..<32).map { UInt8($0 * 37 & 0xff) }
        #expect(try Self.decode(raw) == raw)
        // 32 raw bytes are raw, even when they read as hex text and end in a newline.
        let looksLikeText = Array(String(repeating: "ab", count: 15).utf8) + [0x0d, 0x0a]
        #expect(try Self.decode(looksLikeText) == looksLikeText)
        let hex = raw.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        for text in [hex, hex.uppercased(), hex + "\n", hex + "\r\n", hex + "\r"] {
            #expect(try Self.decode(Array(text.utf8)) == raw, "\(text.debugDescription)")
        }
    }

    @Test func anythingElseIsNot() throws {
        let hex = String(repeating: "0f", count: 32)
        for text in ["", String(hex.dropLast()), hex + "0", hex + "\n\n", hex + "\n\r", " " + hex, String(hex.dropLast()) + "g",
                     hex + " ", String(repeating: "0f", count: 17)] {
            #expect(try Self.decode(Array(text.utf8)) == nil, "\(text.debugDescription)")
        }
        #expect(try Self.decode([UInt8](repeating: 1, count: 31)) == nil)
        #expect(try Self.decode([UInt8](repeating: 1, count: 33)) == nil)
    }
}

extension Base64.Variant {
    /// libsodium's name for this variant (the reference the Swift codec is pinned against).
    var sodium: Int32 {
        switch self {
        case .standard: sodium_base64_VARIANT_ORIGINAL
        case .urlSafe: sodium_base64_VARIANT_URLSAFE
        case .urlSafeNoPadding: sodium_base64_VARIANT_URLSAFE_NO_PADDING
        }
    }
}
