import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
import SiteKeepSoftFIDO2
import SiteKeepFIDO2
import SiteKeepCrypto

/// `slot add fido2`, `--fido2` and `team presence` through the real command line, against the
/// software authenticator (named by `SITEKEEP_FIDO2_DEVICE`, as a plugged key would be found).
@Suite(.serialized)
struct FIDO2CommandTests {
    /// A store and a software authenticator its commands reach (`SITEKEEP_FIDO2_DEVICE`).
    struct Bed {
        let soft: SoftKey
        let store: CLIStore

        init(_ arguments: [String] = ["--no-touch-ms", "300"]) async throws {
            soft = try SoftKey(arguments)
            store = try CLIStore()
            _ = try await store.initialize()
        }

        func run(_ args: [String], typing: [String]? = nil) async -> (status: Int32, out: String, err: String) {
            await runTool(args + ["--home", store.home, "--keyring", "file"], promptAnswers: typing.map { $0.map { Array($0.utf8) } },
                          environment: ["SITEKEEP_FIDO2_DEVICE": soft.device])
        }
    }

    @Test func slotAddFIDO2ThenEveryUnlockingCommandTakesFIDO2() async throws {
        let bed = try await Bed()
        let (soft, store) = (bed.soft, bed.store)
        defer { soft.stop() }
        let added = await bed.run(["slot", "add", "fido2", "--no-pin", "--passphrase-file", store.passFile, "--json"])
        #expect(added.status == 0, "\(added.err)")
        #expect(added.err.contains("Touch the security key"), "\(added.err)")
        let slot = try JSONParser.parse(added.out)
        #expect(slot["kind"] == "prf" && slot["label"] == "fido2" && slot["rpId"] == "sitekeep.invalid", "\(added.out)")
        #expect(slot["fido2PIN"] == false, "\(added.out)")

        let key = await bed.run(["team", "add", "summit", "--fido2", "--json"])
        #expect(key.status == 0, "team add with --fido2: \(key.err)")
        let message = try store.file("msg", Array("sign me".utf8))
        #expect(await bed.run(["team", "sign", "summit", "--message-file", message, "--fido2"]).status == 0)

        // Not touched: a clear refusal, nothing signed.
        try soft.control.setTouch(false)
        let untouched = await bed.run(["team", "sign", "summit", "--message-file", message, "--fido2"])
        #expect(untouched.status != 0 && untouched.err.contains("not touched"), "\(untouched.err)")
        try soft.control.setTouch(true)

        // Another key holds none of this store's credentials.
        let other = try SoftKey()
        defer { other.stop() }
        let elsewhere = await runTool(["team", "sign", "summit", "--message-file", message, "--fido2", "--home", store.home, "--keyring", "file"],
                                      environment: ["SITEKEEP_FIDO2_DEVICE": other.device])
        #expect(elsewhere.status != 0 && elsewhere.err.contains("holds none of this store's"), "\(elsewhere.err)")
        #expect(try other.control.counts().asked == 0)

        // The FIDO2 slot is a current secret for slot changes too.
        #expect(await bed.run(["slot", "add", "recovery", "--fido2"]).status == 0)
        // --tpm2 and --fido2 are one or the other.
        let both = await bed.run(["team", "sign", "summit", "--message-file", message, "--fido2", "--tpm2"])
        #expect(both.status == 64, "\(both.err)")
    }

    /// Issue 47: with no daemon, `--fido2` and `--tpm2` are refused, with their fix, before a PIN
    /// is asked or "touch the security key" is printed, when the store has no slot of the kind,
    /// or (`--fido2`) when no security key is plugged in or the one named is not there.
    @Test func aDeviceUnlockWithNoSlotOrNoKeyIsRefusedBeforeThePINOrTheTouchNote() async throws {
        let bed = try await Bed()
        let (soft, store) = (bed.soft, bed.store)
        defer { soft.stop() }
        let noSlot = await bed.run(["team", "add", "summit", "--fido2"])
        #expect(noSlot.status != 0 && noSlot.err.contains("no fido2 slot") && noSlot.err.contains("sitekeep slot add fido2"), "\(noSlot.err)")
        #expect(!noSlot.err.contains("Touch the security key"), "\(noSlot.err)")
        #expect(try soft.control.counts().asked == 0)
        // A TPM PIN typed at the prompt is never asked for a store with no TPM slot.
        let noTPM = await bed.run(["team", "add", "summit", "--tpm2", "--pin"], typing: ["4711"])
        #expect(noTPM.status != 0 && noTPM.err.contains("no tpm2 slot") && noTPM.err.contains("sitekeep slot add tpm2"), "\(noTPM.err)")
        #expect(!noTPM.err.contains("TPM PIN"), "\(noTPM.err)")

        #expect(await bed.run(["slot", "add", "fido2", "--no-pin", "--passphrase-file", store.passFile]).status == 0)
        let asked = try soft.control.counts().asked
        // No key plugged in and none named.
        let noKey = await runTool(["team", "add", "summit", "--fido2", "--home", store.home, "--keyring", "file"],
                                  environment: ["SITEKEEP_FIDO2_DEVICE": ""])
        #expect(noKey.status != 0 && !noKey.err.contains("Touch the security key"), "\(noKey.err)")
        #expect(noKey.err.contains("no FIDO2 security key is plugged in") || noKey.err.contains("libfido2"), "\(noKey.err)")
        // The key named is not there (unplugged).
        let gone = await runTool(["team", "add", "summit", "--fido2", "--home", store.home, "--keyring", "file"],
                                 environment: ["SITEKEEP_FIDO2_DEVICE": soft.device + "-unplugged"])
        #expect(gone.status != 0 && !gone.err.contains("Touch the security key"), "\(gone.err)")
        #expect(try soft.control.counts().asked == asked)
        // With the key there, the same command is asked of it.
        let added = await bed.run(["team", "add", "summit", "--fido2"])
        #expect(added.status == 0 && added.err.contains("Touch the security key"), "\(added.err)")
    }

    /// Issue 45, defect 8: a key with no PIN gives a slot's bytes to any program of the user
    /// with no touch, so `slot add fido2` refuses it (naming how to set a PIN) before asking for
    /// a touch, and makes a PIN-less slot only with --no-pin, with a warning; `doctor` warns of it.
    @Test func aKeyWithoutAPINIsRefusedUnlessNoPINIsGivenWithAWarning() async throws {
        let bed = try await Bed()
        let (soft, store) = (bed.soft, bed.store)
        defer { soft.stop() }
        let refused = await bed.run(["slot", "add", "fido2", "--passphrase-file", store.passFile])
        #expect(refused.status == 1, "a key with no PIN was enrolled: \(refused.err)")
        #expect(refused.err.contains("fido2-token -S") && refused.err.contains("--no-pin"), "\(refused.err)")
        #expect(try soft.control.counts().asked == 0, "refused before any touch")
        let listed = await bed.run(["slot", "list", "--json"])
        #expect(try JSONParser.parse(listed.out).arrayValue?.count == 2, "no slot was written: \(listed.out)")

        let pin = try store.file("pin.txt", Array("4821\n".utf8))
        let both = await bed.run(["slot", "add", "fido2", "--no-pin", "--pin-file", pin, "--passphrase-file", store.passFile])
        #expect(both.status == 64, "\(both.err)")

        let pinless = await bed.run(["slot", "add", "fido2", "--no-pin", "--passphrase-file", store.passFile, "--json"])
        #expect(pinless.status == 0, "\(pinless.err)")
        #expect(pinless.err.contains("warning: a FIDO2 slot without the key's PIN is only as strong as your login"), "\(pinless.err)")
        let slot = try JSONParser.parse(pinless.out)
        #expect(slot["fido2PIN"] == false, "\(pinless.out)")

        // The key gets a PIN later: `--fido2` still opens the PIN-less slot as it was made, and
        // asks for no PIN on a terminal, since no slot of the store needs it.
        try soft.key.setPIN(try SecretBytes(copying: Array("4821".utf8)))
        let unlocked = await bed.run(["team", "add", "summit", "--fido2", "--json"], typing: [])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(!unlocked.err.contains("PIN:"), "\(unlocked.err)")

        // doctor names the PIN-less slot, as a warning with the remedy.
        let doctor = try JSONParser.parse(await bed.run(["doctor", "--json"]).out)
        let check = doctor["checks"]?.arrayValue?.first { $0["name"]?.stringValue == "FIDO2 slot \(slot["id"]?.stringValue ?? "?")" }
        #expect(check?["warning"] == true, "\(String(describing: check))")
        #expect(check?["detail"]?.stringValue?.contains("no touch") == true && check?["detail"]?.stringValue?.contains("fido2-token -S") == true)
    }

    @Test func aKeyWithAPINAsksForIt() async throws {
        let bed = try await Bed([])
        let (soft, store) = (bed.soft, bed.store)
        defer { soft.stop() }
        try soft.key.setPIN(try SecretBytes(copying: Array("4821".utf8)))
        let pin = try store.file("pin.txt", Array("4821\n".utf8))
        let noPIN = await bed.run(["slot", "add", "fido2", "--passphrase-file", store.passFile])
        #expect(noPIN.status != 0 && noPIN.err.contains("--pin-file"), "\(noPIN.err)")
        let added = await bed.run(["slot", "add", "fido2", "--passphrase-file", store.passFile, "--pin-file", pin, "--json"])
        #expect(added.status == 0, "\(added.err)")
        #expect(try JSONParser.parse(added.out)["fido2PIN"] == true, "the slot needs the key's PIN: \(added.out)")
        #expect(!added.err.contains("warning"), "\(added.err)")
        let unlocked = await bed.run(["team", "add", "summit", "--fido2", "--pin-file", pin])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(!unlocked.err.contains("4821"))
        // On a terminal the PIN is asked for, since the key says it has one.
        let message = try store.file("msg", Array("sign me".utf8))
        let typed = await bed.run(["team", "sign", "summit", "--message-file", message, "--fido2"], typing: ["4821"])
        #expect(typed.status == 0, "the typed PIN was not asked for or not used: \(typed.err)")
    }

    @Test func teamPresenceMakesEachUseNeedATouchAndShowSaysSo() async throws {
        let bed = try await Bed()
        let (soft, store) = (bed.soft, bed.store)
        defer { soft.stop() }
        #expect(await bed.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let set = await bed.run(["team", "presence", "summit", "fido2", "--passphrase-file", store.passFile, "--json"])
        #expect(set.status == 0, "\(set.err)")
        #expect(try JSONParser.parse(set.out)["presence"] == "fido2")
        let shown = await bed.run(["team", "show", "summit", "--json"])
        #expect(try JSONParser.parse(shown.out)["presence"] == "fido2", "\(shown.out)")
        #expect(await bed.run(["team", "show", "summit"]).out.contains("a touch of the security key"))

        // On its own the command unlocks with the passphrase, and still needs the touch.
        let message = try store.file("msg", Array("sign me".utf8))
        try soft.control.setTouch(false)
        let refused = await bed.run(["team", "sign", "summit", "--message-file", message, "--passphrase-file", store.passFile])
        #expect(refused.status != 0 && refused.err.contains("not touched"), "\(refused.err)")
        try soft.control.setTouch(true)
        #expect(await bed.run(["team", "sign", "summit", "--message-file", message, "--passphrase-file", store.passFile]).status == 0)

        // Back to the prompt with the current secret (the key lost): no touch.
        try soft.control.setTouch(false)
        let back = await bed.run(["team", "presence", "summit", "prompt", "--passphrase-file", store.passFile, "--json"])
        #expect(back.status == 0, "\(back.err)")
        #expect(try JSONParser.parse(back.out)["presence"] == "prompt")
        let bad = await bed.run(["team", "presence", "summit", "touch"])
        #expect(bad.status == 64 && bad.err.contains("fido2 or prompt"), "\(bad.err)")
    }
}
