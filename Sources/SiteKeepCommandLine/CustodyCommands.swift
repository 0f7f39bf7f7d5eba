import Foundation
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepKeyring
internal import SiteKeepBridgeProtocol
internal import SiteKeepDaemon

/// `init`, `unlock`, `lock`, `status`, `slot …`, `team …`, `prf salt`, `log …`.
enum CustodyCommands {
    static var all: [CommandSpec] {
        [initialize, unlock, lock, status, slotList, slotAdd, slotRemove, slotPassphrase,
         teamAdd, teamImport, teamList, teamRotate, teamDelete, teamSign, teamVerify, prfSalt, logShow, logVerify]
    }

    // MARK: Store

    static let initialize = CommandSpec(
        path: ["init"],
        summary: "Create the store: a master key, a passphrase slot, a recovery code and the device key",
        discussion: """
        Creates a random 32-byte master key and wraps it under your passphrase (Argon2id, tuned \
        to about half a second on this machine) and under a recovery code, which is shown ONCE: \
        write it down. Also creates this device's P-256 signing key. Keys go to the keyring that \
        --keyring selects (see 'sitekeep doctor'); the store remembers it.
        """,
        options: [.flag("--no-recovery", "do not create a recovery code (not recommended)"),
                  .option("--argon2-iterations", value: "T", "Argon2id passes instead of the calibrated value (2-10)"),
                  .option("--argon2-memory", value: "MIB", "Argon2id memory in MiB instead of the calibrated value (19-1024)"),
                  .option("--restore", value: "URL", "make the store from the door on this vault server (see 'door enable'): its keys, sites and vaults"),
                  VaultSyncCommands.tokenOption,
                  .option("--recovery-file", value: "F", "with --restore: the door's recovery code ('-' for stdin)")],
        secretInputs: [.passphrase, .prf],
        examples: [CommandExample("sitekeep init", "create the store, asking for a passphrase twice"),
                   CommandExample("sitekeep init --passphrase-file pass.txt --json", "create it from a file, for scripts"),
                   CommandExample("sitekeep init --restore https://send.example --token-file token.txt --recovery-file recovery.txt",
                                  "a new machine: the store from its door, opened with the recovery code")]
    ) { inv in
        // A failed init leaves nothing behind: the folder goes if this command created it.
        // The outermost folder that does not exist yet is the one to remove (init makes parents).
        var created: String? = nil
        var folder = inv.settings.home
        while !folder.isEmpty, folder != "/", !FileManager.default.fileExists(atPath: folder) {
            created = folder
            folder = (folder as NSString).deletingLastPathComponent
        }
        // A restore into an empty folder leaves it empty again.
        let emptyBefore = created == nil && ((try? FileManager.default.contentsOfDirectory(atPath: inv.settings.home))?.isEmpty ?? false)
        do {
            if let server = inv.option("--restore") {
                try DoorRestore.run(inv, server: server)
            } else {
                for option in ["--token-file", "--recovery-file", "--prf-file"] where inv.option(option) != nil {
                    throw UsageError("\(option) belongs to a restore: give --restore URL too, or leave it out", command: inv.spec.commandLine)
                }
                try initializeStore(inv)
            }
        } catch {
            if let created { try? FileManager.default.removeItem(atPath: created) }
            if emptyBefore, inv.option("--restore") != nil {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: inv.settings.home)) ?? [] {
                    try? FileManager.default.removeItem(atPath: inv.settings.home + "/" + name)
                }
            }
            throw error
        }
    }

    private static func initializeStore(_ inv: Invocation) throws {
        let store = try StoreContext.open(inv, creating: true)
        guard try !store.custodian.isInitialized() else { throw CustodyError.alreadyInitialized }
        var parameters: Argon2id.Parameters? = nil
        if inv.option("--argon2-iterations") != nil || inv.option("--argon2-memory") != nil {
            let t = try inv.intOption("--argon2-iterations", default: 3, range: 2...10)
            let m = try inv.intOption("--argon2-memory", default: 64, range: 19...1024)
            parameters = try Argon2id.Parameters(iterations: t, memoryKiB: m * 1024)
        }
        let passphrase = try inv.readSecret(.passphrase, prompt: "New SiteKeep passphrase: ", confirm: true)
        PassphraseAdvice.check(passphrase, inv: inv)
        let box = SecretBox(passphrase)
        let chosen = parameters
        let result = try inv.withProgress("Deriving the passphrase key (Argon2id)") { () throws -> InitializationResult in
            try store.custodian.initialize(passphrase: box.take(), parameters: chosen,
                                           withRecoveryCode: !inv.flag("--no-recovery"))
        }
        var members: [JSONMember] = [
            JSONMember(key: "store", value: .string(store.custodian.storeID)),
            JSONMember(key: "home", value: .string(store.home.path)),
            JSONMember(key: "keyring", value: .string(store.keyring.kind.rawValue)),
            JSONMember(key: "passphraseSlot", value: slotJSON(result.passphraseSlot)),
            JSONMember(key: "deviceKey", value: keyJSON(result.deviceKey)),
        ]
        if let code = result.recoveryCode { members.append(JSONMember(key: "recoveryCode", value: .string(code.formatted))) }
        inv.emit(.object(members)) {
            var lines = ["Created SiteKeep store \(store.custodian.storeID) in \(store.home.path)",
                         "  keyring: \(store.keyring.kind.rawValue) (\(store.keyringReason))",
                         "  passphrase slot \(result.passphraseSlot.id): \(result.passphraseSlot.argon2Parameters.map(\.description) ?? "")",
                         "  device key: \(result.deviceKey.algorithm.rawValue) \(result.deviceKey.fingerprint)"]
            if let code = result.recoveryCode {
                lines += ["", inv.style("Recovery code (shown once; write it down and keep it offline):", .bold),
                          "", "    \(code.formatted)", ""]
            }
            return lines.joined(separator: "\n")
        }
    }

    static let unlock = CommandSpec(
        path: ["unlock"],
        summary: "Unlock the store once: the daemon keeps it unlocked (started here if none runs)",
        discussion: """
        Opens a slot with your passphrase, PRF bytes or recovery code and hands it to the daemon \
        serving this store, which stays unlocked until 'sitekeep lock', its idle lock \
        (--idle-lock, default 15 minutes) or the login session locking. Commands that use keys \
        then run inside the daemon and ask for nothing, as with ssh-agent or gpg-agent. When no \
        daemon runs, one is started (detached, logging to daemon.log in the store); \
        --no-autostart (or SITEKEEP_NO_AUTOSTART=1) only checks the secret instead, and each \
        key-using command then unlocks for itself. Failed attempts back off exponentially, and \
        the wait survives restarts.
        """,
        options: [UnlockOptions.recoveryFile,
                  .flag("--no-autostart", "do not start a daemon when none runs; only check the secret"),
                  .option("--idle-lock", value: "DURATION", "lock after this long unused, for this run of the daemon (e.g. 90s, 15m, 2h; default: the idle-lock setting, 15m)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep unlock", "unlock with the passphrase, typed without echo; start the daemon if none runs"),
                   CommandExample("sitekeep unlock --prf-file prf.bin --idle-lock 30m", "unlock with 32 bytes from a passkey's PRF; lock after 30 idle minutes")]
    ) { inv in
        let store = try StoreContext.open(inv)
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        if let idle = inv.option("--idle-lock") { _ = try IdleLock.parse(idle, command: inv.spec.commandLine) }
        var daemon = try DaemonLink.find(inv)
        // A daemon can be started where it has a socket to listen on (SITEKEEP_SOCK or XDG_RUNTIME_DIR).
        let autostart = !inv.flag("--no-autostart") && inv.environment["SITEKEEP_NO_AUTOSTART"] != "1" && CommandLineTool.isCommandLineProcess
            && (try? DaemonSockets.control(environment: inv.environment)) != nil
        if daemon == nil, autostart {
            if let other = DaemonLink.otherStoreDaemon(inv) {
                throw CommandFailure("the daemon on \((try? DaemonSockets.control(environment: inv.environment)) ?? "the control socket") serves the store in \(other), not this one",
                                     remedy: "lock and stop that daemon first, or give this store its own sockets: SITEKEEP_SOCK=$XDG_RUNTIME_DIR/sitekeep-b/bridge.sock sitekeep unlock --home \(inv.settings.home)",
                                     code: "wrong_store")
            }
            // Read the secret first: a typo in a file name should not leave a daemon behind.
            // A wrong passphrase typed at a terminal is asked again (up to three tries).
            let wrong = CustodyError.unlockFailed.description
            var started: DaemonLink? = nil
            try UnlockInput.attempt(inv, isWrong: { ($0 as? CommandFailure)?.problem == wrong }) { input in
                if started == nil { started = try DaemonLink.start(inv) }
                try started!.unlock(input)
            }
            daemon = started
        } else if let daemon {
            // The daemon checks the secret itself (and keeps the back-off); the secret is read once.
            // From a new terminal, the prompts move there: said, so the user knows where to answer.
            if let prompt = try daemon.unlock(inv) {
                inv.note("Prompts now ask here: \(prompt).")
            }
            // Never silently ignored: the running daemon takes it for this run, and says how to keep it.
            if let idle = inv.option("--idle-lock") {
                inv.note("note: the running daemon now locks after \(idle) unused, until it stops; 'sitekeep config set idle-lock \(idle)' keeps it for every start")
            }
        }
        if daemon != nil {
            inv.emit(["unlocked": true, "secretAccepted": true, "daemon": true]) { "Unlocked; the daemon holds the keys until 'sitekeep lock' or its idle lock." }
        } else {
            try store.unlockOneShot(inv)
            // The secret is right, but nothing stays unlocked: say so, as status will.
            inv.emit(["unlocked": false, "secretAccepted": true, "daemon": false]) { UnlockOptions.noDaemonMessage(inv) }
        }
    }

    static let lock = CommandSpec(
        path: ["lock"],
        summary: "Lock the daemon: wipe every unwrapped key it holds",
        examples: [CommandExample("sitekeep lock", "wipe the keys the daemon holds"),
                   CommandExample("sitekeep lock --json", "the same, saying whether a daemon was locked")]
    ) { inv in
        if let daemon = try DaemonLink.find(inv) {
            try daemon.lock()
            inv.emit(["locked": true, "daemon": true]) { "Locked." }
        } else if let other = DaemonLink.otherStoreDaemon(inv) {
            inv.emit(["locked": true, "daemon": false, "otherStoreDaemon": .string(other)]) { "No daemon serves this store, so nothing is unlocked (the daemon running serves \(other))." }
        } else {
            inv.emit(["locked": true, "daemon": false]) { "No daemon runs, so nothing is unlocked." }
        }
    }

    static let status = CommandSpec(
        path: ["status"],
        summary: "Show the store: initialised, locked or unlocked, keyring, slots, back-off",
        examples: [CommandExample("sitekeep status", "show the store's state"),
                   CommandExample("sitekeep status --json", "the same as JSON")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let s = try store.custodian.status()
        let daemon = try DaemonLink.find(inv)
        let unlocked = try daemon?.isUnlocked() ?? false
        let other = daemon == nil ? DaemonLink.otherStoreDaemon(inv) : nil
        var members = [
            JSONMember(key: "initialized", value: .bool(s.initialized)),
            JSONMember(key: "unlocked", value: .bool(unlocked)),
            JSONMember(key: "daemon", value: .bool(daemon != nil)),
            JSONMember(key: "store", value: .string(s.storeID)),
            JSONMember(key: "home", value: .string(s.home)),
            JSONMember(key: "keyring", value: .string(s.keyringKind.rawValue)),
            JSONMember(key: "keyringLocation", value: .string(s.keyringLocation)),
            JSONMember(key: "slots", value: .integer(s.slotCount)),
            JSONMember(key: "unlockBackoffSeconds", value: .integer(s.unlockBackoffSeconds)),
        ]
        if let daemon {
            members.append(JSONMember(key: "controlSocket", value: .string(daemon.controlPath)))
            if let pid = daemon.pid { members.append(JSONMember(key: "daemonPid", value: .int(pid))) }
        }
        if let other { members.append(JSONMember(key: "otherStoreDaemon", value: .string(other))) }
        let places = StatusAgentAndLog(home: s.home, environment: inv.environment)
        members += places.json
        inv.emit(.object(members)) {
            [
                "store      \(s.storeID) (\(s.home))",
                "state      \(!s.initialized ? "not initialised: run 'sitekeep init'" : (unlocked ? "unlocked (daemon)" : "locked"))",
                "daemon     \(daemon.map { "running (pid \($0.pid.map(String.init) ?? "?"), \($0.controlPath))" } ?? (other.map { "none for this store (the daemon running serves \($0))" } ?? "not running"))",
                "keyring    \(s.keyringKind.rawValue): \(s.keyringLocation)",
                "slots      \(s.slotCount)",
            ].joined(separator: "\n") + "\n" + places.lines(daemonRuns: daemon != nil).joined(separator: "\n") + (s.unlockBackoffSeconds > 0 ? "\nback-off   next unlock attempt in \(s.unlockBackoffSeconds) s" : "")
        }
    }

    // MARK: Slots

    static let slotList = CommandSpec(
        path: ["slot", "list"],
        summary: "List the unlock slots (public facts only)",
        examples: [CommandExample("sitekeep slot list", "list the slots"), CommandExample("sitekeep slot list --json", "as JSON")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let slots = try store.custodian.listSlots()
        inv.emit(.array(slots.map(slotJSON))) {
            Table(headers: ["ID", "KIND", "LABEL", "KDF", "DETAILS"], rows: slots.map { s in
                [s.id, s.kind.name, s.label, s.kdf, s.details]
            }).render { inv.style($0, .bold) }
        }
    }

    static let slotAdd = CommandSpec(
        path: ["slot", "add"],
        summary: "Add an unlock slot: a passphrase, a passkey's PRF output, a FIDO2 security key, a recovery code, or this machine's TPM 2.0",
        discussion: """
        KIND is passphrase, prf, fido2, recovery or tpm2. Who can unlock changes only with a secret that \
        unlocks now, given for this command, even when the daemon is unlocked (as cryptsetup \
        luksAddKey asks): the CURRENT passphrase typed when asked or given with \
        --passphrase-file, or --prf-file/--recovery-file. The \
        new slot's secret: for passphrase, --new-passphrase-file or a prompt; for prf, \
        --new-prf-file with the 32 bytes the passkey returned for --eval-input, plus --rp-id and \
        --credential-id so SiteKeep can tell you which passkey to use; fido2 makes a credential \
        with hmac-secret on the plugged security key ('sitekeep config set fido2-device \
        /dev/hidrawN' names one when several are plugged) and writes a PRF slot from its output with the key's PIN: touch the \
        key twice and give its PIN (--pin-file, or --pin to type it); a key with no PIN is refused \
        (set one with 'fido2-token -S /dev/hidrawN'), because a key gives its output without the \
        PIN to any program of yours that asks, with no touch; --no-pin makes a PIN-less slot on a \
        key without a PIN anyway, as strong as your login while the key is plugged in; 'unlock \
        --fido2' opens it, and so does --prf-file with the same bytes; recovery prints a new code once; \
        tpm2 seals the slot's key to this machine's TPM (default device:/dev/tpmrm0; 'sitekeep \
        config set tpm-tcti swtpm:host=127.0.0.1,port=2321' names another, see docs/tpm.md), with a PIN the TPM checks and rate-limits (--new-pin-file, --new-pin, \
        or --pin-file/--pin when the current secret is not itself a TPM slot) and, with --pcrs, \
        bound to those PCRs' current values.
        """,
        arguments: [ArgumentSpec("KIND", "passphrase, prf, fido2, recovery or tpm2")],
        options: [UnlockOptions.recoveryFile,
                  .option("--new-passphrase-file", value: "PATH", "the new slot's passphrase ('-' for stdin)"),
                  .option("--new-prf-file", value: "PATH", "the new slot's 32 PRF bytes (raw or hex; '-' for stdin)"),
                  .option("--rp-id", value: "DOMAIN", "the passkey's relying party id (prf)"),
                  .option("--credential-id", value: "B64URL", "the passkey's credential id (prf)"),
                  .option("--eval-input", value: "B64URL", "the PRF eval input the bytes were made with (prf; default: 32 random bytes)"),
                  .option("--new-pin-file", value: "PATH", "the new TPM slot's PIN (tpm2; '-' for stdin)"),
                  .flag("--new-pin", "type the new TPM slot's PIN when asked (tpm2)"),
                  .option("--pcrs", value: "LIST", "bind the TPM slot to these SHA-256 PCRs' current values, e.g. 7 or 0,7 (tpm2)"),
                  .flag("--no-pin", "make the FIDO2 slot without the key's PIN: any program of yours can then open it while the key is plugged in (fido2)"),
                  .option("--label", value: "TEXT", "a label for the slot")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep slot add recovery --passphrase-file pass.txt", "add a second recovery code"),
                   CommandExample("sitekeep slot add prf --passphrase-file pass.txt --new-prf-file prf.bin --rp-id newsroom.sgit.ai --credential-id AAAA --eval-input c2l0ZWtlZXA",
                                  "add a passkey slot from PRF output"),
                   CommandExample("sitekeep slot add fido2 --passphrase-file pass.txt --pin-file key-pin.txt", "let the plugged security key unlock the store with its PIN (touch it twice)"),
                   CommandExample("sitekeep slot add tpm2 --passphrase-file pass.txt --new-pin-file pin.txt --pcrs 7", "seal a slot to this machine's TPM, with a PIN, bound to Secure Boot's PCR 7")]
    ) { inv in
        let kind = try inv.requiredArgument("KIND")
        let names = UnlockKinds.kinds.names
        guard let slotKind = UnlockKinds.kinds.named(kind) else {
            throw UsageError("KIND must be \(names.dropLast().joined(separator: ", ")) or \(names.last ?? ""), not '\(kind)'", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        let label = inv.option("--label")
        switch slotKind.name {
        case FIDO2Slot.name:
            guard !inv.flag("--tpm2") else {
                throw UsageError("--pin-file and --pin name the security key's PIN here; give the current secret another way than --tpm2",
                                 command: inv.spec.commandLine)
            }
            let withoutPIN = inv.flag("--no-pin")
            if withoutPIN, inv.option(SecretSource.pin.option) != nil || inv.flag("--pin") {
                throw UsageError("--no-pin makes a slot without the key's PIN; leave out --pin-file and --pin", command: inv.spec.commandLine)
            }
            let current = try CurrentSecret.read(inv)
            let pin = SecretBox(withoutPIN ? nil : try UnlockInput.readKeyPIN(inv))
            if withoutPIN { inv.note(Self.pinlessFIDO2Warning) }
            inv.note("Touch the security key when it blinks (twice: to make its credential, then to derive the slot's key).")
            let slot = try inv.withProgress("Waiting for the security key") { () throws -> SlotInfo in
                try store.custodian.addFIDO2Slot(pin: pin.takeIfAny(), withoutPIN: withoutPIN, label: label ?? "fido2", current: current.take())
            }
            inv.emit(slotJSON(slot)) {
                "Added FIDO2 slot \(slot.id)" + (slot.fido2PIN == true ? " with the key's PIN" : " without a PIN")
                    + ": 'sitekeep unlock --fido2' opens it with this security key."
            }
        case PassphraseSlot.name:
            let current = try CurrentSecret.read(inv)
            let new = try inv.secret(.newPassphrase, prompt: "New passphrase: ", confirm: true)
            PassphraseAdvice.check(new, inv: inv)
            let box = SecretBox(new)
            let slot = try inv.withProgress("Deriving the passphrase key (Argon2id)") { () throws -> SlotInfo in
                try store.custodian.addPassphraseSlot(box.take(), label: label ?? "passphrase", current: current.take())
            }
            inv.emit(slotJSON(slot)) { "Added passphrase slot \(slot.id)." }
        case PRFSlot.name:
            guard inv.option("--new-prf-file") != nil, let rp = inv.option("--rp-id"), let credential = inv.option("--credential-id") else {
                throw UsageError("a prf slot needs --new-prf-file, --rp-id and --credential-id", command: inv.spec.commandLine)
            }
            let evalInput = inv.option("--eval-input") ?? Base64.encode(SecureRandom.bytes(count: 32), variant: .urlSafeNoPadding)
            let current = try CurrentSecret.read(inv)
            let prf = try inv.secret(.newPRF, prompt: nil)
            let slot = try store.custodian.addPRFSlot(prfOutput: prf, relyingPartyID: rp, credentialID: credential,
                                                      prfEvalInput: evalInput, label: label ?? "passkey", current: current.take())
            inv.emit(slotJSON(slot)) { "Added PRF slot \(slot.id) for the passkey \(credential) at \(rp)." }
        case RecoverySlot.name:
            let current = try CurrentSecret.read(inv)
            let new = try store.custodian.addRecoverySlot(label: label ?? "recovery", current: current.take())
            inv.emit(.object([JSONMember(key: "slot", value: slotJSON(new.slot)), JSONMember(key: "recoveryCode", value: .string(new.code.formatted))])) {
                "Added recovery slot \(new.slot.id).\n\n" + inv.style("Recovery code (shown once):", .bold) + "\n\n    \(new.code.formatted)\n"
            }
        case TPM2Slot.name:
            var pcrs: [Int] = []
            if let list = inv.option("--pcrs") {
                for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let n = Int(part.trimmingCharacters(in: .whitespaces)), (0...23).contains(n) else {
                        throw UsageError("--pcrs takes PCR numbers 0 to 23 separated by commas, e.g. 7 or 0,7", command: inv.spec.commandLine)
                    }
                    pcrs.append(n)
                }
            }
            let current = try CurrentSecret.read(inv)
            // The new PIN: --new-pin-file or --new-pin; --pin-file/--pin when they do not name the current TPM slot's.
            let pin: SecretBytes?
            if inv.option(SecretSource.newPIN.option) != nil || inv.flag("--new-pin") {
                pin = try inv.secret(.newPIN, prompt: "New TPM PIN: ", confirm: true)
            } else if !inv.flag("--tpm2"), inv.option(SecretSource.pin.option) != nil || inv.flag("--pin") {
                pin = try inv.secret(.pin, prompt: "New TPM PIN: ", confirm: true)
            } else {
                pin = nil
            }
            let box = SecretBox(pin)
            let pcrList = pcrs
            let slot = try inv.withProgress("Sealing to the TPM") { () throws -> SlotInfo in
                try store.custodian.addTPM2Slot(pin: box.takeIfAny(), pcrs: pcrList, label: label ?? "tpm2", current: current.take())
            }
            inv.emit(slotJSON(slot)) {
                "Added TPM 2.0 slot \(slot.id)" + (slot.tpmPIN == true ? " with a PIN" : " without a PIN")
                    + (pcrs.isEmpty ? "" : ", bound to PCR \(pcrs.map(String.init).joined(separator: ","))") + "."
            }
        default:
            // A kind the registry lists but the command line has no flow for (none today).
            throw UsageError("'slot add \(kind)' is not available on the command line", command: inv.spec.commandLine)
        }
    }

    /// What `slot add fido2 --no-pin` says before it asks for a touch.
    static let pinlessFIDO2Warning = "warning: a FIDO2 slot without the key's PIN is only as strong as your login while the key is plugged in: "
        + "any program of yours can ask the key for the slot's key with no touch. Set a PIN on the key ('fido2-token -S') and add the slot without --no-pin instead."

    static let slotRemove = CommandSpec(
        path: ["slot", "remove"],
        summary: "Remove an unlock slot (never the last one)",
        arguments: [ArgumentSpec("SLOT", "the slot id from 'sitekeep slot list'")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep slot remove 3f2a9c1d --prf-file prf.bin", "remove that slot, unlocking with a passkey")],
        printsData: false
    ) { inv in
        let store = try StoreContext.open(inv)
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        let slotID = try inv.requiredArgument("SLOT")
        guard try store.custodian.listSlots().contains(where: { $0.id == slotID }) else { throw CustodyError.slotNotFound(slotID) }
        let current = try CurrentSecret.read(inv)
        try store.custodian.removeSlot(id: slotID, current: current.take())
        inv.say("Removed slot \(try inv.requiredArgument("SLOT")).")
    }

    static let slotPassphrase = CommandSpec(
        path: ["slot", "passphrase"],
        summary: "Change a passphrase slot's passphrase (the new slot is written before the old one goes)",
        arguments: [ArgumentSpec("SLOT", "the passphrase slot's id")],
        options: [UnlockOptions.recoveryFile, .option("--new-passphrase-file", value: "PATH", "the new passphrase ('-' for stdin)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep slot passphrase 3f2a9c1d", "change it, typing the old and new passphrases")]
    ) { inv in
        let slotID = try inv.requiredArgument("SLOT")
        let store = try StoreContext.open(inv)
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        guard let old = try store.custodian.listSlots().first(where: { $0.id == slotID }) else { throw CustodyError.slotNotFound(slotID) }
        guard old.kind == .passphrase else { throw CustodyError.invalidArgument("slot \(slotID) is not a passphrase slot") }
        let current = try CurrentSecret.read(inv, prompt: "Current passphrase: ")
        let new = try inv.secret(.newPassphrase, prompt: "New passphrase: ", confirm: true)
        PassphraseAdvice.check(new, inv: inv)
        let box = SecretBox(new)
        let slot = try inv.withProgress("Deriving the passphrase key (Argon2id)") { () throws -> SlotInfo in
            try store.custodian.changePassphrase(slotID: slotID, to: box.take(), current: current.take())
        }
        inv.emit(slotJSON(slot)) { "Passphrase changed: slot \(slotID) replaced by \(slot.id)." }
    }

    // MARK: Team keys

    static let teamAdd = CommandSpec(
        path: ["team", "add"],
        summary: "Generate a team signing key (Ed25519 or P-256), wrapped under the master key",
        arguments: [ArgumentSpec("ID", "the key id ([a-z0-9][a-z0-9._-]{0,63})")],
        options: [UnlockOptions.recoveryFile, .option("--name", value: "TEXT", "a display name"),
                  .option("--algorithm", value: "ed25519|p256", "the algorithm (default ed25519)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team add desk --name 'Newsroom desk' --passphrase-file pass.txt", "create an Ed25519 team key"),
                   CommandExample("sitekeep team add summit-p256 --algorithm p256 --prf-file prf.bin", "create a P-256 key, unlocking with a passkey's PRF bytes")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let algorithm = try parseAlgorithm(inv)
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let info = try store.custodian.generateTeamKey(id: id, name: inv.option("--name") ?? id, algorithm: algorithm)
        inv.emit(keyJSON(info)) { describe(info) }
    }

    static let teamImport = CommandSpec(
        path: ["team", "import"],
        summary: "Import a team key: an OpenSSH private key, a PKCS#8 PEM key, a 32-byte seed, or a '#key=' web link",
        discussion: "The key is read from --key-file (or '-' for stdin), never from the command line; it is wrapped under the master key at once. "
            + "It takes an OpenSSH private key ('-----BEGIN OPENSSH PRIVATE KEY-----', Ed25519 or ECDSA P-256, without a passphrase: "
            + "remove it on a copy with 'ssh-keygen -p', or add the key with ssh-add instead), a PKCS#8 PEM or DER key (Ed25519 or P-256), "
            + "an Ed25519 seed as 32 raw bytes, 64 hex characters or 43 base64url characters, or a '#key=' web link; it says which it got.",
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [UnlockOptions.recoveryFile, .option("--name", value: "TEXT", "a display name")],
        secretInputs: [.passphrase, .prf, .key],
        examples: [CommandExample("sitekeep team import alice --key-file link.txt --passphrase-file pass.txt", "import the key in a #key= link")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        guard inv.option("--key-file") != nil else {
            throw UsageError("team import needs --key-file PATH ('-' for stdin)", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let contents = try inv.readSecret(.key, prompt: "Team key: ")
        var kind = KeyFileKind(description: "a key")
        let material = try TeamKeyMaterial.detect(contents, kind: &kind)
        let info = try store.custodian.importTeamKey(id: id, name: inv.option("--name") ?? id, material: material)
        inv.emit(keyJSON(info)) { "Imported \(kind), as team key \(info.id).\n" + describe(info) }
    }

    static let teamList = CommandSpec(
        path: ["team", "list"],
        summary: "List team keys and the device key (public facts only)",
        examples: [CommandExample("sitekeep team list", "list keys"), CommandExample("sitekeep team list --json", "as JSON")]
    ) { inv in
        let store = try StoreContext.open(inv)
        var keys = try store.custodian.listTeamKeys()
        if let device = try? store.custodian.deviceKeyInfo() { keys.append(device) }
        inv.emit(.array(keys.map(keyJSON))) {
            Table(headers: ["ID", "NAME", "ALGORITHM", "VERSION", "FINGERPRINT"], rows: keys.map {
                [$0.id, $0.name, $0.algorithm.rawValue, "\($0.version)", $0.fingerprint]
            }).render { inv.style($0, .bold) }
        }
    }

    static let teamRotate = CommandSpec(
        path: ["team", "rotate"],
        summary: "Rotate a team key: a new version signs, older versions only verify",
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team rotate summit --passphrase-file pass.txt", "make version 2 the signing version")]
    ) { inv in
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let info = try store.custodian.rotateTeamKey(id: try inv.requiredArgument("ID"))
        inv.emit(keyJSON(info)) { describe(info) }
    }

    static let teamDelete = CommandSpec(
        path: ["team", "delete"],
        summary: "Delete a team key and every version of it",
        discussion: "Asks first on a terminal (type the key's id); scripts pass --yes. Needs the store unlocked: " + UnlockOptions.note,
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [Invocation.yes, UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team delete summit --yes --passphrase-file pass.txt", "delete the key without asking")],
        printsData: false
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let store = try StoreContext.open(inv)
        let info = try store.custodian.teamKeyInfo(id: id)
        try inv.confirmDestruction("the team key \(id) (\(info.name), \(info.algorithm.rawValue), \(info.versions.count) version\(info.versions.count == 1 ? "" : "s"))",
                                   typing: id, noun: "the key's id")
        try store.unlockOneShot(inv)
        try store.custodian.deleteTeamKey(id: id)
        inv.say("Deleted team key \(id).")
    }

    static let teamSign = CommandSpec(
        path: ["team", "sign"],
        summary: "Sign a message with a team key; prints the signature, never the key",
        discussion: """
        The message is read from --message-file (or '-' for stdin). The signature is printed in \
        base64 (raw 64 bytes: Ed25519, or P-256 r||s); --der prints a P-256 signature in DER. \
        --ssh-namespace NS prints an armoured SSHSIG signature in namespace NS instead, as \
        'ssh-keygen -Y sign -n NS' writes it, for 'ssh-keygen -Y verify' (see 'team show --ssh' \
        for the allowed-signers line), in a namespace the key's SSH policy allows ('team ssh \
        enable'). Every signature needs your approval, even with the daemon unlocked: give the \
        current passphrase for this command (--passphrase-file), type it when asked, or approve \
        the daemon's presence prompt (SITEKEEP_ASKPASS). Data that is an SSH login request is \
        refused: only the ssh-agent socket signs logins, after checking the destination.
        """,
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [UnlockOptions.recoveryFile, .option("--message-file", value: "PATH", "the message ('-' for stdin)"),
                  .flag("--der", "P-256 only: print the signature in DER (as openssl expects)"),
                  .option("--ssh-namespace", value: "NS", "print an armoured SSHSIG signature in namespace NS (file, git, ...)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team sign summit --message-file note.txt --passphrase-file pass.txt", "sign a file"),
                   CommandExample("sitekeep team sign summit --message-file note.txt --ssh-namespace git --passphrase-file pass.txt",
                                  "an SSHSIG signature that 'ssh-keygen -Y verify -n git' accepts")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        guard let path = inv.option("--message-file") else {
            throw UsageError("team sign needs --message-file PATH ('-' for stdin)", command: inv.spec.commandLine)
        }
        if inv.option("--ssh-namespace") != nil, inv.flag("--der") {
            throw UsageError("--der and --ssh-namespace are different signature forms; give one", command: inv.spec.commandLine)
        }
        if let namespace = inv.option("--ssh-namespace"), !SSHAgentPolicy.isValidNamespace(namespace) {
            throw UsageError("--ssh-namespace '\(namespace.prefix(64))' is not an SSH namespace: use 1-64 characters from a-z A-Z 0-9 . _ - @ +, "
                             + "e.g. file or git", command: inv.spec.commandLine)
        }
        let message = try readMessage(path, inv: inv)
        let store = try StoreContext.open(inv)
        let keyID = try Approval.keyID(id)
        // The command describes the request; custody's one gate decides it in one call, reading
        // the key's record once: the key exists and its policy allows the bytes, every argument
        // can be honoured for it (``KeyUseContext/beforeAsking``: no prompt, and no key use, for
        // a request that cannot run), then the approval (a key that needs a touch is approved by
        // the touch alone), the signature and the audit line.
        let namespace = inv.option("--ssh-namespace")
        let der = inv.flag("--der")
        let derRefusal = "--der applies to P-256 keys only"
        // --der is checked against the key's public record before anything is asked (the
        // passphrase of a one-shot command included): a form the key cannot give never prompts.
        // Only this form reads the record here; the gate still reads it once for the signature.
        if der, let info = try? store.custodian.teamKeyInfo(id: id), info.algorithm != .p256 {
            throw UsageError("\(derRefusal); \(id) is \(info.algorithm.rawValue) (its signature is printed raw, "
                             + "64 bytes in base64: leave out --der)", command: inv.spec.commandLine)
        }
        let approval = try Approval.request(inv, store: store, op: .teamSign, keyID: keyID)
        let context = KeyUseContext(client: .commandLine, op: .teamSign, approval: approval,
                                    detail: namespace.map { "sshsig namespace \($0)" }) { [inv] (key: KeyUseFacts) throws(CustodyError) in
            if der, key.algorithm != .p256 {
                throw .invalidArgument("\(derRefusal); \(id) is \(key.algorithm.rawValue) (its signature is printed raw, "
                                       + "64 bytes in base64: leave out --der)")
            }
            if key.needsTouch { inv.note("Touch the security key when it blinks, to approve this signature with \(id).") }
        }
        let data = namespace.map { AgentCommands.sshsigSignedData(message, namespace: $0) } ?? message
        let signed: TeamSignature
        do {
            signed = try store.custodian.signature(keyID: id, message: data, context: context)
        } catch CustodyError.invalidArgument(let why) where why.hasPrefix(derRefusal) {
            throw UsageError(why, command: inv.spec.commandLine)
        } catch let error as CustodyError {
            throw Approval.failure(error, op: .teamSign, keyID: keyID)
        }
        if let namespace {
            let armored = try AgentCommands.sshsigArmor(signed, namespace: namespace)
            inv.emit(.object([JSONMember(key: "key", value: .string(id)), JSONMember(key: "namespace", value: .string(namespace)),
                              JSONMember(key: "sshsig", value: .string(armored))])) { armored }
            return
        }
        var signature = signed.signature
        let info = signed
        if der {
            // Checked before the key was used; a key rotated to another algorithm since is not possible (rotation keeps it).
            signature = try P256.Signing.Signature(rawRepresentation: signature).derRepresentation
        }
        inv.emit(.object([JSONMember(key: "key", value: .string(id)), JSONMember(key: "version", value: .integer(info.version)),
                          JSONMember(key: "algorithm", value: .string(info.algorithm.rawValue)),
                          JSONMember(key: "signature", value: .string(Base64.encode(signature)))])) {
            Base64.encode(signature)
        }
    }

    static let teamVerify = CommandSpec(
        path: ["team", "verify"],
        summary: "Verify a signature with a team key's public key (no unlock needed)",
        arguments: [ArgumentSpec("ID", "the key id"), ArgumentSpec("SIGNATURE", "the signature, base64")],
        options: [.option("--message-file", value: "PATH", "the message ('-' for stdin)"),
                  .option("--version", value: "N", "the key version (default: the current one)")],
        examples: [CommandExample("sitekeep team verify summit Nov7OopOh1x5qMj36WqrOm6yE+nEJAWFZRKYp/mIjbenOEVVdNSv+jR/uXRfRfIevIgluRkMix4OwVml7PeSBA== --message-file note.txt", "check a base64 signature of note.txt")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        guard let path = inv.option("--message-file") else {
            throw UsageError("team verify needs --message-file PATH ('-' for stdin)", command: inv.spec.commandLine)
        }
        let message = try readMessage(path, inv: inv)
        guard var signature = try? Base64.decode(try inv.requiredArgument("SIGNATURE")) else {
            throw UsageError("SIGNATURE must be base64", command: inv.spec.commandLine)
        }
        let version = inv.option("--version") != nil ? try inv.intOption("--version", default: 1, range: 1...1000) : nil
        let store = try StoreContext.open(inv)
        // A P-256 signature may come in DER (what `team sign --der` and openssl print).
        if signature.count != 64, (try? store.custodian.teamKeyInfo(id: id))?.algorithm == .p256,
           let raw = try? P256.Signing.Signature(derRepresentation: signature).rawRepresentation {
            signature = raw
        }
        let ok = try store.custodian.verify(keyID: id, version: version, signature: signature, message: message)
        inv.emit(["valid": .bool(ok)]) { ok ? "valid" : "INVALID" }
        if !ok { throw CommandFailure("the signature does not verify with \(id)", code: "bad_signature") }
    }

    // MARK: PRF, log

    static let prfSalt = CommandSpec(
        path: ["prf", "salt"],
        summary: "Print the CTAP2 hmac-secret salt for a PRF slot or eval input (for fido2-assert -h)",
        discussion: """
        A browser turns a WebAuthn PRF eval input into the authenticator's hmac-secret salt with \
        SHA-256("WebAuthn PRF" || 0x00 || input). Give that salt to 'fido2-assert -G -h' and a \
        FIDO2 key returns the same 32 bytes the page gets. Name a slot (its eval input is stored) \
        or pass --eval-input.
        """,
        arguments: [ArgumentSpec("SLOT", "a PRF slot id", optional: true)],
        options: [.option("--eval-input", value: "B64URL", "a PRF eval input instead of a slot")],
        examples: [CommandExample("sitekeep prf salt --eval-input c2l0ZWtlZXA", "the salt for an eval input"),
                   CommandExample("sitekeep prf salt 3f2a9c1d --json", "the salt of a PRF slot")]
    ) { inv in
        let salt: [UInt8]
        if let input = inv.option("--eval-input") {
            guard let bytes = try? Base64.decode(input, variant: .urlSafeNoPadding) else {
                throw UsageError("--eval-input must be base64url without padding", command: inv.spec.commandLine)
            }
            salt = WebAuthnPRF.hmacSecretSalt(forEvalInput: bytes)
        } else if let slot = inv.argument("SLOT") {
            salt = try StoreContext.open(inv).custodian.hmacSecretSalt(slotID: slot)
        } else {
            throw UsageError("give a PRF slot id or --eval-input", command: inv.spec.commandLine)
        }
        inv.emit(["salt": .string(Base64.encode(salt)), "saltHex": .string(Hex.encode(salt))]) { Base64.encode(salt) }
    }

    static let logShow = CommandSpec(
        path: ["log", "show"],
        summary: "Show the audit log of key uses",
        options: [.option("--limit", value: "N", "show the last N entries (default 50)")],
        examples: [CommandExample("sitekeep log show --limit 10", "the last ten key uses")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let limit = try inv.intOption("--limit", default: 50, range: 1...1_000_000)
        let entries = Array(try store.custodian.auditLog.entries().suffix(limit))
        inv.emit(.array(entries.map { e in
            .object([JSONMember(key: "seq", value: .integer(e.seq)), JSONMember(key: "time", value: .string(e.time)),
                     // The log file writes "-" where a line has no site or key; JSON says null.
                     JSONMember(key: "site", value: e.site == "-" ? .null : .string(e.site)), JSONMember(key: "op", value: .string(e.op)),
                     JSONMember(key: "key", value: e.key == "-" ? .null : .string(e.key)), JSONMember(key: "result", value: .string(e.result)),
                     JSONMember(key: "presenceAgeMs", value: e.presenceAgeMs.map { .integer($0) } ?? .null),
                     JSONMember(key: "prompt", value: e.prompt.map { .string($0) } ?? .null),
                     JSONMember(key: "detail", value: e.detail.map { .string($0) } ?? .null)])
        })) {
            Table(headers: ["SEQ", "TIME", "SITE", "OP", "KEY", "RESULT", "PRESENCE", "DETAIL"], rows: entries.map { e in
                ["\(e.seq)", e.time, e.site, e.op, e.key, e.result,
                 e.presenceAgeMs.map { "\($0) ms" + (e.prompt.map { " (prompt \($0))" } ?? "") } ?? "", e.detail ?? ""]
            }).render { inv.style($0, .bold) }
        }
    }

    static let logVerify = CommandSpec(
        path: ["log", "verify"],
        summary: "Check the audit log's hash chain and its keyring anchor; exits 1 at the first edited, removed, reordered or cut line",
        examples: [CommandExample("sitekeep log verify", "check the chain")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let v = try store.custodian.auditLog.verify()
        inv.emit(.object([JSONMember(key: "intact", value: .bool(v.isIntact)), JSONMember(key: "lines", value: .integer(v.lineCount)),
                          JSONMember(key: "firstBadLine", value: v.firstBadLine.map { .integer($0) } ?? .null),
                          JSONMember(key: "reason", value: .string(v.reason)),
                          JSONMember(key: "anchoredThrough", value: v.anchoredThrough.map { .integer($0) } ?? .null)])) {
            guard v.isIntact else { return "BROKEN at line \(v.firstBadLine ?? 0): \(v.reason ?? "")" }
            let anchored = v.anchoredThrough.map { "; the keyring's anchor vouches for lines 1-\($0)" } ?? "; not anchored in the keyring yet"
            return "intact: \(v.lineCount) lines chain from the store's genesis" + anchored
        }
        if !v.isIntact {
            throw CommandFailure("the audit log is broken at line \(v.firstBadLine ?? 0): \(v.reason ?? "")",
                                 remedy: "something edited, removed, reordered or cut lines; keep the file for investigation", code: "log_broken")
        }
    }

    // MARK: Helpers

    static func parseAlgorithm(_ inv: Invocation) throws -> SigningAlgorithm {
        guard let text = inv.option("--algorithm") else { return .ed25519 }
        guard let a = SigningAlgorithm(rawValue: text.lowercased().replacingOccurrences(of: "-", with: "")) else {
            throw UsageError("--algorithm must be ed25519 or p256, not '\(text)'", command: inv.spec.commandLine)
        }
        return a
    }

    static func readMessage(_ path: String, inv: Invocation) throws -> [UInt8] {
        if path == "-" { return try inv.io.readStandardInput(limit: 16 << 20) }
        return try InputFile.read(path, option: "--message-file", limit: 16 << 20)
    }

    static func slotJSON(_ s: SlotInfo) -> JSONValue {
        var m: [JSONMember] = [JSONMember(key: "id", value: .string(s.id)), JSONMember(key: "kind", value: .string(s.kind.name)),
                               JSONMember(key: "label", value: .string(s.label)), JSONMember(key: "kdf", value: .string(s.kdf)),
                               JSONMember(key: "created", value: .int(s.created))]
        if let p = s.argon2Parameters {
            m.append(JSONMember(key: "argon2", value: ["iterations": .integer(p.iterations), "memoryKiB": .integer(p.memoryKiB)]))
        }
        if let rp = s.relyingPartyID { m.append(JSONMember(key: "rpId", value: .string(rp))) }
        if let c = s.credentialID { m.append(JSONMember(key: "credentialId", value: .string(c))) }
        if let e = s.prfEvalInput { m.append(JSONMember(key: "prfEvalInput", value: .string(e))) }
        if let h = s.hmacSecretSalt { m.append(JSONMember(key: "hmacSecretSalt", value: .string(h))) }
        if let pin = s.tpmPIN { m.append(JSONMember(key: "tpmPIN", value: .bool(pin))) }
        if let pcrs = s.tpmPCRs { m.append(JSONMember(key: "tpmPCRs", value: .array(pcrs.map { .integer($0) }))) }
        if let pin = s.fido2PIN { m.append(JSONMember(key: "fido2PIN", value: .bool(pin))) }
        return .object(m)
    }

    static func keyJSON(_ k: SigningKeyInfo) -> JSONValue {
        .object([
            JSONMember(key: "id", value: .string(k.id)), JSONMember(key: "name", value: .string(k.name)),
            JSONMember(key: "algorithm", value: .string(k.algorithm.rawValue)), JSONMember(key: "version", value: .integer(k.version)),
            JSONMember(key: "publicKey", value: .string(k.publicKey)), JSONMember(key: "fingerprint", value: .string(k.fingerprint)),
            JSONMember(key: "publicKeyPEM", value: .string(k.versions.last?.publicKeyPEM)),
            JSONMember(key: "versions", value: .array(k.versions.map { v in
                ["version": .integer(v.version), "fingerprint": .string(v.fingerprint), "canSign": .bool(v.canSign)]
            })),
        ])
    }

    static func describe(_ k: SigningKeyInfo) -> String {
        var lines = ["key \(k.id) (\(k.name)): \(k.algorithm.rawValue), version \(k.version), \(k.fingerprint)",
                     "public key: \(k.publicKey)"]
        if let pem = k.versions.last?.publicKeyPEM { lines.append(pem.trimmingCharacters(in: .newlines)) }
        return lines.joined(separator: "\n")
    }
}

/// Holds a secret for one hand-over into a `@Sendable` closure.
final class SecretBox: @unchecked Sendable {
    // @unchecked: taken exactly once, by the closure it was made for.
    private var secret: SecretBytes?
    init(_ secret: consuming SecretBytes?) { self.secret = consume secret }
    func take() -> SecretBytes { secret.take()! }
    /// The secret, or nil when the box was made with none.
    func takeIfAny() -> SecretBytes? { secret.take() }
}

extension UnlockOptions {
    /// What `unlock` says when the secret is right but no daemon keeps the keys: why none was
    /// started (the user's --no-autostart, SITEKEEP_NO_AUTOSTART, or no runtime folder to put
    /// its sockets in) and what to do.
    static func noDaemonMessage(_ inv: Invocation) -> String {
        let head = "The secret unlocks this store, but nothing stays unlocked: "
        let oneShot = "or pass the secret to each command (each then unlocks for itself)."
        if inv.flag("--no-autostart") {
            return head + "--no-autostart was given, so no daemon was started. Run 'sitekeep unlock' without it (or 'sitekeep serve') to keep keys unlocked, " + oneShot
        }
        if inv.environment["SITEKEEP_NO_AUTOSTART"] == "1" {
            return head + "SITEKEEP_NO_AUTOSTART=1 is set, so no daemon was started. Unset it (or run 'sitekeep serve') to keep keys unlocked, " + oneShot
        }
        if (try? DaemonSockets.control(environment: inv.environment)) == nil {
            return head + "neither XDG_RUNTIME_DIR nor SITEKEEP_SOCK is set, so no daemon can be found or started (its sockets live there). "
                + "Set XDG_RUNTIME_DIR (a login session sets it), or SITEKEEP_SOCK=DIR/bridge.sock in a folder only you can open, then run 'sitekeep unlock' again; " + oneShot
        }
        return head + "no daemon runs and none was started here. Run 'sitekeep unlock' from a shell (or 'sitekeep serve') to keep keys unlocked, " + oneShot
    }
}
