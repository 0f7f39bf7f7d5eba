#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepBridgeProtocol
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepHardening
import SiteKeepKeyring
import SiteKeepSecureMemory
import SiteKeepSystem
import SiteKeepVault
import SiteKeepRunClient

/// `sitekeep-read`: the one-shot `sitekeep vault cat NAME PATH --prf-file F [--home DIR]`,
/// started by the front end when no daemon runs the command: the same calls the whole tool
/// makes (open the store, unlock with the PRF output, open the vault under its authenticated
/// record, read the file) without starting the whole tool, whose start-up alone takes longer
/// than the read. It links no Foundation and no SQLite.
///
/// It answers only while nothing has happened that the whole tool would not repeat in the
/// same way. Another form of the command line (``OneShotCatRequest``), a `SITEKEEP_KEYRING`
/// that is not a keyring's name, a keyring that does not open, a PRF file that is not a small regular file of the plain format, a store
/// or vault name that does not resolve, a vault record from before signer pins, a store not
/// initialised: each goes to `sitekeep-main`, which runs the command and reports what is wrong
/// as every command does. From the unlock on (a failed unlock counts towards the back-off and
/// is audited, so it is never tried twice), an error is reported here as the whole tool words
/// it without `--json`: `error: …` (and `hint: …`) on standard error, exit status 1. One
/// exception: a damaged object fetched from the vault's remote goes to `sitekeep-main`, which
/// fetches it again (this reader knows no remote; the unlock is then audited twice).
@main
enum OneShotCat {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let environment = ProcessEnvironment.current()
        if let request = OneShotCatRequest(arguments), let cwd = ProcessEnvironment.workingDirectory(),
           let home = try? StoreHome.resolve(explicit: request.home, environment: environment, workingDirectory: cwd),
           let status = run(request, home: home, environment: environment) {
            // `_exit`, not `exit`: everything is written (unbuffered) and the audit log synced;
            // the atexit handlers (OpenSSL's teardown of its tables, C++ destructors) would only
            // free memory the kernel takes back anyway, and took a twentieth of the run.
            _exit(status)
        }
        SiblingExecutable.execWholeTool(arguments)
    }

    /// Runs `request` for the store in `home`; returns the exit status, or nil when the whole
    /// tool must run the command instead (nothing was changed or printed).
    static func run(_ request: OneShotCatRequest, home: StoreHome, environment: [String: String]) -> Int32? {
        // `SITEKEEP_KEYRING` as the whole tool reads it (no `--keyring` here); a bad value is its to report.
        guard let keyring = KeyringChoice(rawValue: environment["SITEKEEP_KEYRING"] ?? "auto") else { return nil }
        // A daemon that may serve this store runs the command (the whole tool forwards it):
        // this process unlocks only where the front end would not have reached a daemon.
        if environment["SITEKEEP_NO_DAEMON"] != "1", let socket = try? DaemonSockets.control(environment: environment) {
            var st = stat()
            if lstat(socket, &st) == 0 { return nil }
        }
        guard (try? ProcessHardening.apply()) != nil else { return nil }
        guard StoreOpening.exists(home: home.path),
              let record = try? VaultRegistry(file: home.path + "/vaults.json").record(named: request.vault), !record.isLegacy,
              let prf = readPRF(request.prfFile),
              // A process that ends in milliseconds needs no idle-lock timer (nor the thread it starts).
              let store = try? StoreOpening.open(home: home.path, keyring: keyring, configuration: CustodianConfiguration(autoLockTimer: false)),
              (try? store.custodian.isInitialized()) == true else { return nil }
        let custodian = store.custodian
        // One fsync of the audit log, as the process ends, for the lines of its few
        // milliseconds (the daemon groups its own within 50 ms).
        custodian.auditLog.syncOnFlushOnly()
        defer { custodian.auditLog.finish() }
        do {
            try custodian.unlock(.prf(prf))
            let registry = VaultRegistry(file: home.path + "/vaults.json")
            let library = VaultLibrary(registry: registry, keyStore: CustodianVaultKeyStore(custodian: custodian, registry: registry),
                                       signer: { DeviceCommitSigner(custodian: custodian, vaultName: $0) })
            var bytes = try library.open(request.vault).vault.read(path: request.path)
            // The decrypted file is wiped once written, not only freed (`_exit` skips nothing
            // that would wipe it).
            defer { SecureMemory.zero(&bytes) }
            do throws(Errno) {
                try FileIO.writeAll(1, bytes)
            } catch {
                throw SystemError("write the file to", "standard output", errno: error)
            }
            return 0
        } catch VaultError.damagedFetchedObject {
            // A fetched object to fetch again from the vault's remote: the whole tool does that
            // (this one-shot reader knows no remote).
            return nil
        } catch let e as StoreOpenError {
            report(e.problem, remedy: e.remedy)
        } catch {
            report(String(describing: error), remedy: nil)
        }
        return 1
    }

    /// The PRF output in `path`: a regular file holding what ``PRFOutput`` reads (the whole
    /// tool's rule). Nil for anything else, which the whole tool then reads and reports; a pipe
    /// is never read here, so its bytes are still there for it.
    static func readPRF(_ path: String) -> SecretBytes? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 32, info.st_size <= 66 else { return nil }
        var count = 0
        guard let scratch = try? SecretBytes(count: 67, initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            count = (try? FileIO.readNamedInput(path, into: buffer, acceptPipes: false)) ?? -1
        }), count >= 32, count <= 66 else { return nil }
        return scratch.withUnsafeBytes { (all: UnsafeRawBufferPointer) -> SecretBytes? in
            (try? PRFOutput.decode(UnsafeRawBufferPointer(rebasing: all[0..<count]))) ?? nil
        }
    }

    /// An error as the whole tool prints it without `--json`.
    static func report(_ problem: String, remedy: String?) {
        var text = "error: \(problem)\n"
        if let remedy { text += "hint: \(remedy)\n" }
        try? FileIO.writeAll(2, Array(text.utf8))
    }
}
