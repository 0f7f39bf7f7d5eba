import Testing
import SiteKeepJSON

@Suite struct JSONParserTests {
    @Test func parsesEveryType() throws {
        let v = try JSONParser.parse(#" {"a": [1, -2.5, true, false, null, "x\u00e9\n"], "b": {}} "#)
        #expect(v["a"] == .array([.int(1), .double(-2.5), .bool(true), .bool(false), .null, .string("xé\n")]))
        #expect(v["b"] == .object([]))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul", "'a'", "[1 2]",
        "{\"a\" 1}", "{a:1}", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"a\u{01}\"", "[1] x", "NaN", "Infinity",
        "{\"a\":1,\"a\":2}", "/* c */ 1",
        // Unterminated strings whose plain run ends exactly at the input's end (16 and 32 bytes).
        "\"" + String(repeating: "a", count: 16), "[\"" + String(repeating: "a", count: 32),
    ])
    func refusesMalformed(_ text: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(text) }
    }

    @Test func refusesInvalidUTF8() {
        for bad: [UInt8] in [[0x22, 0xff, 0x22], [0x22, 0xc0, 0xaf, 0x22], [0x22, 0xed, 0xa0, 0x80, 0x22], [0x22, 0xe2, 0x82, 0x22]] {
            #expect(throws: JSONError.self) { try JSONParser.parse(bad) }
        }
    }

    /// The string scanner skips runs of 16 plain bytes at once: what stops a run (a quote, an
    /// escape, a control byte, invalid or valid UTF-8) must be found wherever it falls.
    @Test func longStringsAreCheckedAtEveryPosition() throws {
        let plain = Array(String(repeating: "Zm9vYmFy+/09", count: 20).utf8)   // 240 bytes
        for position in [0, 1, 14, 15, 16, 17, 31, 32, 33, 100, 223, 224, 238, 239] {
            func doc(_ middle: [UInt8]) -> [UInt8] {
                [0x22] + plain[..<position] + middle + plain[(position + 1)...] + [0x22]
            }
            #expect(throws: JSONError.self, "control byte at \(position)") { try JSONParser.parse(doc([0x01])) }
            #expect(throws: JSONError.self, "lone 0xff at \(position)") { try JSONParser.parse(doc([0xff])) }
            #expect(throws: JSONError.self, "a quote ends the string early at \(position)") { try JSONParser.parse(doc([0x22])) }
            let e = try JSONParser.parse(doc(Array("é".utf8)))
            #expect(e.stringValue == String(decoding: plain[..<position] + Array("é".utf8) + plain[(position + 1)...], as: UTF8.self))
            let n = try JSONParser.parse(doc(Array("\\n".utf8)))
            #expect(n.stringValue == String(decoding: plain[..<position] + [0x0a] + plain[(position + 1)...], as: UTF8.self))
        }
        for limit in [15, 16, 17, 100, 239] {
            let limits = JSONLimits(maxBytes: 1000, maxDepth: 3, maxStringBytes: limit, maxElements: 3)
            #expect(try JSONParser.parse([0x22] + plain[..<limit] + [0x22], limits: limits).stringValue?.utf8.count == limit)
            #expect(throws: JSONError.self, "\(limit + 1) bytes over a limit of \(limit)") {
                try JSONParser.parse([0x22] + plain[..<(limit + 1)] + [0x22], limits: limits)
            }
        }
    }

    @Test func enforcesLimits() {
        let limits = JSONLimits(maxBytes: 100, maxDepth: 3, maxStringBytes: 5, maxElements: 3)
        #expect(throws: JSONError(reason: .tooDeep(limit: 3), offset: 3)) { try JSONParser.parse("[[[[1]]]]", limits: limits) }
        #expect(throws: JSONError.self) { try JSONParser.parse("\"abcdef\"", limits: limits) }
        #expect(throws: JSONError.self) { try JSONParser.parse("[1,2,3,4]", limits: limits) }
        #expect(throws: JSONError(reason: .tooLarge(limit: 100), offset: 0)) {
            try JSONParser.parse(String(repeating: " ", count: 101) + "1", limits: limits)
        }
        // A deep document far past the limit fails fast instead of overflowing the stack.
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONError.self) { try JSONParser.parse(deep, limits: .message) }
    }

    @Test func keysAreComparedByBytesNotCanonicalEquivalence() throws {
        let v = try JSONParser.parse("{\"\u{00E9}\": 1, \"e\u{0301}\": 2}")
        #expect(v.objectValue?.count == 2)
        #expect(v["\u{00E9}"] == .int(1))
        #expect(v["e\u{0301}"] == .int(2))
    }

    @Test func integersAndFractionsStayDistinct() throws {
        #expect(try JSONParser.parse("5") == .int(5))
        #expect(try JSONParser.parse("5.0") == .double(5))
        #expect(try JSONParser.parse("9223372036854775808") == .double(9223372036854775808))
    }
}

@Suite struct JSONSerializerTests {
    /// The signing bytes of the sgit `init` commit in SGIT-FORMAT.md §4.4.
    @Test func canonicalMatchesTheSgitSigningBytes() {
        let commit: JSONValue = [
            "schema": "commit_v1", "tree_id": "obj-cas-imm-9f5613e8b39d",
            "message_enc": "d0dZF6W5JxRNvAbbHI1MGp6ll01Rtf1HVJGdtZTVzzM=",
            "branch_id": "branch-clone-e4f153e46c4a9de4", "author_key_id": "key-rnd-imm-1a064d7bd08a7250",
            "author_signature": nil, "parents": [], "timestamp_ms": 1795957712240, "attestations": [],
        ]
        let expected = #"{"attestations":[],"author_key_id":"key-rnd-imm-1a064d7bd08a7250","author_signature":null,"branch_id":"branch-clone-e4f153e46c4a9de4","message_enc":"d0dZF6W5JxRNvAbbHI1MGp6ll01Rtf1HVJGdtZTVzzM=","parents":[],"schema":"commit_v1","timestamp_ms":1795957712240,"tree_id":"obj-cas-imm-9f5613e8b39d"}"#
        #expect(JSONSerializer.string(commit, style: .canonical) == expected)
    }

    @Test func pythonStyleMatchesJsonDumps() {
        let tree: JSONValue = ["schema": "tree_v1", "entries": []]
        #expect(JSONSerializer.string(tree, style: .python) == #"{"schema": "tree_v1", "entries": []}"#)
        let v: JSONValue = ["a": "é😀/\u{1f}", "b": [1, 2.0, nil, true]]
        #expect(JSONSerializer.string(v, style: .python) == #"{"a": "\u00e9\ud83d\ude00/\u001f", "b": [1, 2.0, null, true]}"#)
    }

    @Test func compactKeepsNonASCIIAndSlash() {
        let v: JSONValue = ["p": "docs/é"]
        #expect(JSONSerializer.string(v) == #"{"p":"docs/é"}"#)
    }

    /// The plain-string fast path scans a whole string at once (vectorized): one character that
    /// needs escaping, anywhere in a long string, must still take the escaping path.
    @Test func aLongStringWithOneSpecialCharacterAnywhereIsEscaped() throws {
        let plain = String(repeating: "AbC+/09=", count: 700)   // 5,600 characters, nothing to escape
        #expect(JSONSerializer.string(.string(plain)) == "\"" + plain + "\"")
        for special in ["\"", "\\", "\n", "\u{1}", "\u{7f}", "é"] {
            for position in [0, 1, 15, 16, 31, 32, 33, 63, 64, 65, 1000, 5598, 5599] {
                var chars = Array(plain)
                chars[position] = Character(special)
                let text = String(chars)
                for style in [JSONSerializer.Style.compact, .python] {
                    let bytes = JSONSerializer.bytes(.string(text), style: style)
                    #expect(try JSONParser.parse(bytes) == .string(text), "\(special.debugDescription) at \(position)")
                    // DEL and non-ASCII are escaped only by the python style (json.dumps' ensure_ascii).
                    let escaped = (special != "é" && special != "\u{7f}") || style == .python
                    #expect((bytes.count > text.utf8.count + 2) == escaped, "\(special.debugDescription) at \(position), \(style)")
                }
            }
        }
    }

    @Test func roundTripsThroughTheParser() throws {
        let v: JSONValue = ["k": ["x": [1, -0.25, "q\"\\"], "y": nil], "z": false]
        for style in [JSONSerializer.Style.compact, .canonical, .python, .pretty] {
            let back = try JSONParser.parse(JSONSerializer.bytes(v, style: style))
            if style == .canonical { #expect(back["k"]?["x"] == v["k"]?["x"]) } else { #expect(back == v) }
        }
    }
}

@Suite struct JSONObjectReaderTests {
    @Test func refusesUnknownFieldsAndWrongTypes() throws {
        let v = try JSONParser.parse(#"{"id": "1", "n": 2, "extra": true}"#)
        var r = try JSONObjectReader(v, path: "request")
        #expect(try r.string("id") == "1")
        #expect(throws: JSONShapeError.wrongType(path: "request.n", expected: "a string", found: "integer")) { try r.string("n") }
        #expect(throws: JSONShapeError.unknownField(path: "request.extra")) { try r.finish() }
        #expect(throws: JSONShapeError.missing(path: "request.absent")) { try r.int("absent") }
    }
}

/// `.foundationPretty` is the form Foundation's `JSONEncoder` wrote with `.prettyPrinted` (the form
/// of `sites.json` and `sitekeep audit --json` before they moved to SiteKeepJSON). The expected
/// bytes were captured from `JSONEncoder` (`[.prettyPrinted, .sortedKeys]`, Swift 6.3.1 on
/// Linux) before the move; they are pinned here as text, not re-derived, so a later Foundation
/// cannot move them.
@Suite struct FoundationPrettyTests {
    @Test func writesWhatJSONEncoderWrote() {
        let cases: [(JSONValue, String)] = [
            (.object([JSONMember(key: "sites", value: .array([])), JSONMember(key: "version", value: .int(1))]),
             "{\n  \"sites\" : [\n\n  ],\n  \"version\" : 1\n}"),
            (.object([JSONMember(key: "k", value: .string("\u{0}\u{1}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1f}"))]),
             #"{\#n  "k" : "\u0000\u0001\b\t\n\f\r\u001f"\#n}"#),
            (.object([JSONMember(key: "a", value: .array([])), JSONMember(key: "b", value: .array([.array([])]))]),
             "{\n  \"a\" : [\n\n  ],\n  \"b\" : [\n    [\n\n    ]\n  ]\n}"),
            (.array([.object([])]), "[\n  {\n\n  }\n]"),
            (.object([JSONMember(key: "hasLeaks", value: .bool(true)), JSONMember(key: "passed", value: .bool(false)),
                      JSONMember(key: "s", value: .string("Caf\u{e9} \"Q\" \\ / \u{65}\u{301} \u{65E5}\u{672C} \u{1F600} \u{7f} \u{2028}")),
                      JSONMember(key: "o", value: .array([.string("https://[::1]:8080"), .null]))]),
             "{\n  \"hasLeaks\" : true,\n  \"passed\" : false,\n  \"s\" : \"Caf\u{e9} \\\"Q\\\" \\\\ \\/ \u{65}\u{301} \u{65E5}\u{672C} \u{1F600} \u{7f} \u{2028}\",\n"
                + "  \"o\" : [\n    \"https:\\/\\/[::1]:8080\",\n    null\n  ]\n}"),
        ]
        for (value, expected) in cases {
            #expect(JSONSerializer.string(value, style: .foundationPretty) == expected)
            #expect(JSONSerializer.bytes(value, style: .foundationPretty) == Array(expected.utf8))
        }
    }

    @Test func slashesAreEscapedOnlyInThisStyleAndItReadsBack() throws {
        let v: JSONValue = ["u/r/l": ["https://a.example/x", "", "////"], "n": 3]
        let text = JSONSerializer.string(v, style: .foundationPretty)
        #expect(text.contains(#""u\/r\/l""#) && text.contains(#""\/\/\/\/""#) && !text.contains("//"))
        #expect(try JSONParser.parse(Array(text.utf8)) == v)
        for style in [JSONSerializer.Style.compact, .canonical, .python, .pretty] {
            #expect(!JSONSerializer.string(v, style: style).contains(#"\/"#), "\(style)")
        }
        // Slashes at every position of the vectorized plain-run check are escaped.
        for position in [0, 1, 15, 16, 17, 31, 32, 33, 99] {
            var chars = Array(repeating: Character("a"), count: 100)
            chars[position] = "/"
            let bytes = JSONSerializer.bytes(.string(String(chars)), style: .foundationPretty)
            #expect(bytes.count == 100 + 3, "/ at \(position)")
            #expect(try JSONParser.parse(bytes) == .string(String(chars)))
        }
    }
}
