import Testing
@testable import SiteKeepCommandLine
import SiteKeepRunClient

/// What the front end hands to `sitekeep-read`: only the plain one-shot `vault cat`; every
/// other option `vault cat` takes, and every malformed line, goes to the whole tool.
@Suite struct OneShotRequestTests {
    let plain = ["vault", "cat", "notes", "docs/a.txt", "--prf-file", "prf.bin"]

    @Test func thePlainFormInAnyOrderIsTheRequest() {
        let want = OneShotCatRequest(vault: "notes", path: "docs/a.txt", prfFile: "prf.bin", home: nil)
        #expect(OneShotCatRequest(plain) == want)
        #expect(OneShotCatRequest(["vault", "cat", "--prf-file=prf.bin", "notes", "docs/a.txt"]) == want)
        #expect(OneShotCatRequest(["vault", "cat", "notes", "--prf-file", "prf.bin", "docs/a.txt", "--home", "/s"])
                == OneShotCatRequest(vault: "notes", path: "docs/a.txt", prfFile: "prf.bin", home: "/s"))
        #expect(OneShotCatRequest(plain + ["--home=/s t"])?.home == "/s t")
    }

    /// Taken from the command table, so an option added to `vault cat` later is covered.
    @Test func everyOtherOptionOfVaultCatGoesToTheWholeTool() {
        let spec = VaultCommands.cat
        let options = spec.options + spec.secretInputs.flatMap(\.optionSpecs) + CommandLineTool.globalOptions
        let others = options.filter { $0.name != "--home" && $0.name != "--prf-file" }
        #expect(others.contains { $0.name == "--json" } && others.contains { $0.name == "--passphrase-file" })
        for option in others {
            let forms = option.value == nil ? [[option.name]] : [[option.name, "x"], [option.name + "=x"]]
            for form in forms + (option.short.map { [[$0]] } ?? []) {
                #expect(OneShotCatRequest(plain + form) == nil, "\(form)")
                #expect(OneShotCatRequest(Array(plain.prefix(2)) + form + Array(plain.dropFirst(2))) == nil, "\(form)")
            }
        }
    }

    @Test func malformedLinesAreNotTheRequest() {
        for line in [
            ["vault", "cat", "notes", "--prf-file", "prf.bin"],                              // one operand
            ["vault", "cat", "notes", "a", "b", "--prf-file", "prf.bin"],                    // three
            ["vault", "cat", "notes", "a"],                                                  // no PRF file
            ["vault", "cat", "notes", "a", "--prf-file", "-"],                               // standard input
            ["vault", "cat", "notes", "a", "--prf-file="],
            ["vault", "cat", "notes", "a", "--prf-file"],                                    // value missing
            plain + ["--prf-file", "other"],                                                 // repeated
            plain + ["--home", "/a", "--home", "/b"],
            plain + ["--home"],
            plain + ["--"], ["vault", "cat", "--", "notes", "a", "--prf-file", "p"],
            plain + ["-"], plain + ["-x"], plain + ["--prf"], plain + [""],
            ["--home", "/s"] + plain,                                                        // a leading global option
            ["vault", "ls", "notes", "a", "--prf-file", "p"], ["cat", "vault", "notes", "a", "--prf-file", "p"],
            [], ["vault"], ["vault", "cat"],
        ] {
            #expect(OneShotCatRequest(line) == nil, "\(line)")
        }
    }
}
