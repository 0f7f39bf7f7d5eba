import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepTestSupport

/// The ways an input file can end, and the two inputs every option must refuse.
enum InputForm: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case crlf, lf, none, empty, tooLarge = "too-large"
    var testDescription: String { rawValue }

    /// `secret` written in this form; `limit` is the option's bound (too large is one past it).
    func bytes(_ secret: [UInt8], limit: Int) -> [UInt8] {
        switch self {
        case .crlf: secret + [0x0d, 0x0a]
        case .lf: secret + [0x0a]
        case .none: secret
        case .empty: []
        case .tooLarge: [UInt8](repeating: 0x61, count: limit + 1)
        }
    }

    /// Whether the option must refuse this input, and the words its error must contain.
    var refusal: String? {
        switch self {
        case .crlf, .lf, .none: nil
        case .empty: "empty"
        case .tooLarge: "larger than"
        }
    }
}

/// One reader of secrets for every option (issue 12, defect 7): each option takes CRLF, LF and no
/// line ending to the same secret, refuses an empty or too large input, and the secret it stores
/// is the one every other option and the prompt reach.
@Suite struct SecretInputTests {
    static let plain = Array("correct horse battery".utf8)   // CLIStore's passphrase
    static let new = Array("new staple".utf8)

    /// Expects `r` to have refused `form`, or to have succeeded.
    func expectOutcome(_ r: (status: Int32, out: String, err: String), _ form: InputForm, _ what: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        if let refusal = form.refusal {
            #expect(r.status == 1, "\(what) accepted a \(form) input", sourceLocation: sourceLocation)
            #expect(r.err.contains(refusal), "\(what): \(r.err)", sourceLocation: sourceLocation)
        } else {
            #expect(r.status == 0, "\(what) refused a \(form) input: \(r.err)", sourceLocation: sourceLocation)
        }
    }

    func unlocks(_ store: CLIStore, _ args: [String], stdin: [UInt8] = [], typing: [String]? = nil) async -> Bool {
        await store.run(["unlock"] + args, stdin: stdin, typing: typing).status == 0
    }

    @Test func theRuleStripsOneLineEndingAndNothingElse() throws {
        let cases: [(String, String)] = [
            ("pass", "pass"), ("pass\n", "pass"), ("pass\r\n", "pass"), ("pass\r", "pass"),
            ("pass\n\n", "pass\n"), ("pass\r\r\n", "pass\r"), ("pass\n\r", "pass\n"),
            (" pass \t\n", " pass \t"), ("\npass", "\npass"), ("\r\n", ""), ("", ""),
        ]
        for (input, secret) in cases {
            let length = Array(input.utf8).withUnsafeBytes { SecretReader.textLength($0) }
            #expect(length == secret.utf8.count, "\(input.debugDescription) should give \(secret.debugDescription)")
        }
    }

    @Test(arguments: InputForm.allCases) func passphraseFileFollowsTheRule(form: InputForm) async throws {
        let store = try CLIStore()
        let file = try store.file("init-pass", form.bytes(Self.plain, limit: SecretSource.passphrase.limit))
        let r = await store.run(["init", "--passphrase-file", file, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"])
        expectOutcome(r, form, "init --passphrase-file")
        guard form.refusal == nil else { return }
        #expect(await unlocks(store, ["--passphrase-file", store.passFile]), "the plain passphrase does not open what init stored")
        #expect(await unlocks(store, ["--passphrase-file", file]))
        let u = await store.run(["unlock", "--passphrase-file", try store.file("u", form.bytes(Self.plain, limit: SecretSource.passphrase.limit))])
        #expect(u.status == 0)
    }

    @Test(arguments: InputForm.allCases) func passphraseFileRefusalsOnUnlock(form: InputForm) async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let file = try store.file("pass-\(form)", form.bytes(Self.plain, limit: SecretSource.passphrase.limit))
        expectOutcome(await store.run(["unlock", "--passphrase-file", file]), form, "unlock --passphrase-file")
    }

    /// The defect: `slot passphrase --new-passphrase-file` with `new\r\n` stored `new\r`.
    @Test(arguments: InputForm.allCases) func newPassphraseFileFollowsTheRuleForSlotPassphrase(form: InputForm) async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let slot = try #require(created["passphraseSlot"]?["id"]?.stringValue)
        let file = try store.file("new-\(form)", form.bytes(Self.new, limit: SecretSource.newPassphrase.limit))
        let r = await store.run(["slot", "passphrase", slot, "--passphrase-file", store.passFile, "--new-passphrase-file", file])
        expectOutcome(r, form, "slot passphrase --new-passphrase-file")
        if form.refusal != nil {
            #expect(await unlocks(store, ["--passphrase-file", store.passFile]), "a refused change must leave the old passphrase")
            return
        }
        let plainNew = try store.file("new-plain", Self.new)
        #expect(await unlocks(store, ["--passphrase-file", plainNew]), "the new passphrase does not open the slot written from a \(form) file")
        #expect(!(await unlocks(store, ["--passphrase-file", store.passFile])), "the old passphrase still opens")
    }

    @Test(arguments: InputForm.allCases) func newPassphraseFileFollowsTheRuleForSlotAdd(form: InputForm) async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let file = try store.file("added-\(form)", form.bytes(Self.new, limit: SecretSource.newPassphrase.limit))
        let r = await store.run(["slot", "add", "passphrase", "--passphrase-file", store.passFile, "--new-passphrase-file", file])
        expectOutcome(r, form, "slot add passphrase --new-passphrase-file")
        guard form.refusal == nil else { return }
        #expect(await unlocks(store, ["--passphrase-file", try store.file("new-plain", Self.new)]),
                "the added passphrase does not open the slot written from a \(form) file")
    }

    @Test(arguments: InputForm.allCases) func recoveryFileFollowsTheRule(form: InputForm) async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let code = Array(try #require(created["recoveryCode"]?.stringValue).utf8)
        let file = try store.file("recovery-\(form)", form.bytes(code, limit: SecretSource.recoveryCode.limit))
        expectOutcome(await store.run(["unlock", "--recovery-file", file]), form, "unlock --recovery-file")
    }

    @Test(arguments: InputForm.allCases) func prfFileFollowsTheRule(form: InputForm) async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let raw = [UInt8](repeating: 0x5a, count: 32)
        let rawFile = try store.file("prf.bin", raw)
        #expect(await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", rawFile,
                                 "--rp-id", "x", "--credential-id", "AAAA"]).status == 0)
        let hex = try store.file("prf-\(form).hex", form.bytes(Array(Hex.encode(raw).utf8), limit: SecretSource.prf.limit))
        expectOutcome(await store.run(["unlock", "--prf-file", hex]), form, "unlock --prf-file (hex)")
        #expect(await unlocks(store, ["--prf-file", rawFile]))
    }

    @Test(arguments: InputForm.allCases) func newPRFFileFollowsTheRule(form: InputForm) async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let raw = [UInt8](repeating: 0xa5, count: 32)
        let hex = try store.file("new-prf-\(form).hex", form.bytes(Array(Hex.encode(raw).utf8), limit: SecretSource.newPRF.limit))
        let r = await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", hex,
                                 "--rp-id", "x", "--credential-id", "AAAA"])
        expectOutcome(r, form, "slot add prf --new-prf-file")
        guard form.refusal == nil else { return }
        #expect(await unlocks(store, ["--prf-file", try store.file("prf.bin", raw)]))
    }

    @Test func prfFilesAreExactly32RawBytesOr64HexDigits() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let raw: [UInt8] = Array(0..<32)
        #expect(await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", try store.file("p", raw),
                                 "--rp-id", "x", "--credential-id", "AAAA"]).status == 0)
        // 32 bytes are raw even when the last one is a newline; upper-case hex is hex.
        #expect(await unlocks(store, ["--prf-file", try store.file("upper", Array(Hex.encode(raw).uppercased().utf8))]))
        for bad in [raw + [0x0a], Array((Hex.encode(raw) + " \n").utf8), Array(Hex.encode(raw).dropLast().utf8), Array("zz".utf8)] {
            let r = await store.run(["unlock", "--prf-file", try store.file("bad", bad)])
            #expect(r.status == 1 && r.err.contains("not 32 raw bytes or 64 hex characters"), "\(bad.count) bytes: \(r.err)")
        }
    }

    @Test(arguments: InputForm.allCases) func keyFileFollowsTheRule(form: InputForm) async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let seed = Array(Hex.encode([UInt8](repeating: 0x42, count: 32)).utf8)
        #expect(await store.run(["team", "import", "reference", "--key-file", try store.file("seed", seed), "--passphrase-file", store.passFile]).status == 0)
        let file = try store.file("seed-\(form)", form.bytes(seed, limit: SecretSource.key.limit))
        let r = await store.run(["team", "import", "imported", "--key-file", file, "--passphrase-file", store.passFile])
        expectOutcome(r, form, "team import --key-file")
        guard form.refusal == nil else { return }
        let keys = try JSONParser.parse(await store.run(["team", "list", "--json"]).out)
        let fingerprints = Dictionary(uniqueKeysWithValues: (keys.arrayValue ?? []).compactMap { k -> (String, String)? in
            guard let id = k["id"]?.stringValue, let f = k["fingerprint"]?.stringValue else { return nil }
            return (id, f)
        })
        #expect(fingerprints["imported"] != nil && fingerprints["imported"] == fingerprints["reference"])
    }

    @Test func standardInputFollowsTheSameRule() async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let slot = try #require(created["passphraseSlot"]?["id"]?.stringValue)
        #expect(await unlocks(store, ["--passphrase-file", "-"], stdin: Self.plain + [0x0d, 0x0a]))
        let changed = await store.run(["slot", "passphrase", slot, "--passphrase-file", store.passFile, "--new-passphrase-file", "-"],
                                      stdin: Self.new + [0x0d, 0x0a])
        #expect(changed.status == 0, "\(changed.err)")
        #expect(await unlocks(store, ["--passphrase-file", try store.file("n", Self.new)]))
        #expect(await unlocks(store, ["--passphrase-file", "-"], stdin: Self.new))
        let empty = await store.run(["unlock", "--passphrase-file", "-"], stdin: [0x0a])
        #expect(empty.status == 1 && empty.err.contains("empty") && empty.err.contains("standard input"), "\(empty.err)")
        let large = await store.run(["unlock", "--passphrase-file", "-"], stdin: [UInt8](repeating: 0x61, count: SecretSource.passphrase.limit + 1))
        #expect(large.status == 1 && large.err.contains("larger than"), "\(large.err)")
    }

    /// Issue 13, item 6: an option naming a FIFO that no program writes to, or a device, fails
    /// at once with the path and the reason instead of hanging (or reading a device without
    /// end); a pipe a program writes to (what `--passphrase-file <(…)` gives) still works.
    /// A watchdog opens the FIFO for writing from 10 s on, so a regression fails the time check
    /// instead of hanging the suite.
    @Test func aFIFOOrADeviceIsRefusedAtOnceAndALivePipeStillReads() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let fifo = store.dir.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let watchdog = FIFOWatchdog(fifo)
        defer { watchdog.stop() }
        let cases: [([String], String)] = [
            (["unlock", "--passphrase-file", fifo], "pipe that nothing was written to"),
            (["unlock", "--prf-file", fifo], "pipe that nothing was written to"),
            (["unlock", "--prf-file", "/dev/zero"], "device"),
            (["team", "sign", "k", "--message-file", fifo, "--passphrase-file", store.passFile], "FIFO"),
            (["team", "verify", "k", "AAAA", "--message-file", "/dev/zero"], "device"),
        ]
        for (args, reason) in cases {
            let start = ContinuousClock.now
            let r = await store.run(args)
            #expect(ContinuousClock.now - start < .seconds(5), "\(args) took \(ContinuousClock.now - start)")
            #expect(r.status == 1, "\(args): \(r.err)")
            #expect(r.err.contains(reason) && r.err.contains(args.contains(fifo) ? fifo : "/dev/zero"), "\(args): \(r.err)")
        }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let line = Self.plain + [0x0a]
        #expect(write(fds[1], line, line.count) == line.count)
        close(fds[1])
        #expect(await unlocks(store, ["--passphrase-file", "/proc/self/fd/\(fds[0])"]), "a pipe with the passphrase in it unlocks")
    }

    @Test func onlyOneInputMayBeStandardInput() async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let slot = try #require(created["passphraseSlot"]?["id"]?.stringValue)
        let r = await store.run(["slot", "passphrase", slot, "--passphrase-file", "-", "--new-passphrase-file", "-"],
                                stdin: Self.plain + [0x0a] + Self.new + [0x0a])
        #expect(r.status == 64)
        #expect(r.err.contains("only one input may be standard input"), "\(r.err)")
        #expect(r.err.contains("--passphrase-file") && r.err.contains("--new-passphrase-file"))
        let sign = await store.run(["team", "sign", "x", "--message-file", "-", "--prf-file", "-"])
        #expect(sign.status == 64 && sign.err.contains("only one input may be standard input"))
        // The old passphrase still opens: nothing was read or changed.
        #expect(await unlocks(store, ["--passphrase-file", store.passFile]))
    }

    /// The defect's case end to end: a CRLF file for the new passphrase, then the same file and
    /// the passphrase typed at the prompt both open the store.
    @Test func slotPassphraseWithACRLFFileUnlocksWithTheSameFileAndTheTypedPassphrase() async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let slot = try #require(created["passphraseSlot"]?["id"]?.stringValue)
        let crlf = try store.file("new-crlf", Self.new + [0x0d, 0x0a])
        let changed = await store.run(["slot", "passphrase", slot, "--passphrase-file", store.passFile, "--new-passphrase-file", crlf])
        #expect(changed.status == 0, "\(changed.err)")
        #expect(await unlocks(store, ["--passphrase-file", crlf]), "the CRLF file does not open the slot it wrote")
        #expect(await unlocks(store, [], typing: ["new staple"]), "the typed passphrase does not open the slot")
    }

    @Test func thePromptFollowsTheRuleAndConfirmsNewPassphrases() async throws {
        let store = try CLIStore()
        let created = try await store.initialize()
        let slot = try #require(created["passphraseSlot"]?["id"]?.stringValue)
        // A new passphrase is asked twice; entries that differ change nothing.
        let differ = await store.run(["slot", "passphrase", slot, "--passphrase-file", store.passFile], typing: ["new staple", "new stapler"])
        #expect(differ.status == 1 && differ.err.contains("differ"), "\(differ.err)")
        #expect(await unlocks(store, ["--passphrase-file", store.passFile]))
        // A line typed with a carriage return before its newline is the same passphrase.
        let changed = await store.run(["slot", "passphrase", slot], typing: ["correct horse battery", "new staple\r", "new staple\r"])
        #expect(changed.status == 0, "\(changed.err)")
        #expect(await unlocks(store, ["--passphrase-file", try store.file("n", Self.new + [0x0a])]))
        #expect(await unlocks(store, [], typing: ["new staple"]))
        let empty = await store.run(["unlock"], typing: [""])
        #expect(empty.status == 1 && empty.err.contains("empty"))
        let long = await store.run(["unlock"], typing: [String(repeating: "a", count: SecretSource.passphrase.limit + 1)])
        #expect(long.status == 1 && long.err.contains("larger than"))
    }
}
