import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// `slot add tpm2` and `--tpm2` through the real command line, against the software TPM tools/test
/// starts (SITEKEEP_TPM_TCTI).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["SITEKEEP_TPM_TCTI"] != nil,
                "SITEKEEP_TPM_TCTI is not set: run under tools/test, which starts swtpm on loopback"))
struct TPMCommandTests {
    @Test func slotAddTPM2ThenEveryUnlockingCommandTakesTPM2() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let pin = try store.file("pin.txt", Array("4711\n".utf8))
        let wrong = try store.file("wrong.txt", Array("4712".utf8))
        let added = await store.run(["slot", "add", "tpm2", "--passphrase-file", store.passFile, "--pin-file", pin,
                                     "--pcrs", "23", "--label", "laptop", "--json"])
        #expect(added.status == 0, "\(added.err)")
        let slot = try JSONParser.parse(added.out)
        #expect(slot["kind"]?.stringValue == "tpm2" && slot["tpmPIN"] == .bool(true) && slot["tpmPCRs"] == .array([.integer(23)]))

        let key = await store.run(["team", "add", "summit", "--tpm2", "--pin-file", pin, "--json"])
        #expect(key.status == 0, "team add with --tpm2: \(key.err)")
        let message = try store.file("msg", Array("sign me".utf8))
        let signed = await store.run(["team", "sign", "summit", "--message-file", message, "--tpm2", "--pin-file", pin])
        #expect(signed.status == 0, "\(signed.err)")
        let refused = await store.run(["team", "sign", "summit", "--message-file", message, "--tpm2", "--pin-file", wrong])
        #expect(refused.status != 0 && refused.err.contains("the TPM refused the PIN"), "\(refused.err)")
        #expect(!refused.err.contains("4712"))
        let noPIN = await store.run(["team", "sign", "summit", "--message-file", message, "--tpm2"])
        #expect(noPIN.status != 0 && noPIN.err.contains("--pin-file"), "\(noPIN.err)")
        // The TPM slot is a current secret for slot changes too.
        let recovery = await store.run(["slot", "add", "recovery", "--tpm2", "--pin-file", pin])
        #expect(recovery.status == 0, "\(recovery.err)")
    }

    @Test func aPCROutOfRangeIsRefused() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let r = await store.run(["slot", "add", "tpm2", "--passphrase-file", store.passFile, "--pcrs", "24"])
        #expect(r.status != 0 && r.err.contains("--pcrs"), "\(r.err)")
    }
}
