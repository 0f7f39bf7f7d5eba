#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import SiteKeepSystem
internal import SiteKeepBridge
internal import SiteKeepBridgeProtocol
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepDaemon

/// The CLI's link to the daemon serving its store (`sitekeep serve`) through the control
/// socket, for `unlock`, `lock` and `status`. Every request names the store id, so a daemon
/// serving another store refuses it (`wrong_store`) and this link reports no daemon for ours.
struct DaemonLink: Sendable {
    let controlPath: String
    let storeID: String
    /// The daemon's process id, as it reported it.
    var pid: Int64? = nil

    /// The daemon serving the store in `home`, when one answers; nil when none does.
    /// - Throws: when a listener cannot be trusted (named, never silently skipped).
    static func find(_ inv: Invocation) throws -> DaemonLink? {
        guard let storeID = StoreContext.storeID(home: inv.settings.home),
              let path = try? DaemonSockets.control(environment: inv.environment) else { return nil }
        var link = DaemonLink(controlPath: path, storeID: storeID)
        do {
            guard let reply = try ControlClient.send(path: path, store: storeID, op: "status") else { return nil }
            if reply["ok"] != .bool(true) { return nil }   // wrong_store, or an older daemon
            link.pid = reply["pid"]?.intValue
        } catch {
            guard case let .untrustedSocket(path, reason) = error else { return nil }
            throw CommandFailure("refusing to talk to \(path), nothing was sent: \(reason)", code: "untrusted_socket")
        }
        return link
    }

    /// Another store's daemon listening where this store's would: its folder, for messages.
    static func otherStoreDaemon(_ inv: Invocation) -> String? {
        guard let path = try? DaemonSockets.control(environment: inv.environment),
              let reply = try? ControlClient.send(path: path, store: nil, op: "status"),
              reply["ok"] == .bool(true), let home = reply["home"]?.stringValue, home != inv.settings.home else { return nil }
        return home
    }

    private func request(_ op: String, method: String? = nil, secret: UnsafeRawBufferPointer? = nil, extra: [JSONMember] = []) throws -> JSONValue {
        guard let reply = try ControlClient.send(path: controlPath, store: storeID, op: op, method: method, secret: secret, extra: extra) else {
            throw CommandFailure("the daemon stopped answering at \(controlPath)", remedy: "start it again with 'sitekeep unlock' or 'sitekeep serve'", code: "no_daemon")
        }
        if reply["ok"] != .bool(true) {
            throw CommandFailure(reply["error"]?.stringValue ?? "the daemon refused the request", code: reply["code"]?.stringValue ?? "daemon")
        }
        return reply
    }

    /// Hands the daemon the invocation's unlock secret, read as for a one-shot unlock (a wrong
    /// passphrase typed at a terminal is asked again, up to three tries).
    /// - Returns: where the daemon's prompts ask from now on, when this unlock moved them there
    ///   (it named a terminal or a display).
    @discardableResult
    func unlock(_ inv: Invocation) throws -> String? {
        let wrong = CustodyError.unlockFailed.description
        var moved: String? = nil
        // The daemon asks its own device, so it says whether a device unlock can be tried (this
        // command's environment may name no security key or TPM where the daemon's does).
        try UnlockInput.attempt(inv, deviceCheck: { method in try checkUnlock(method: method) },
                                isWrong: { ($0 as? CommandFailure)?.problem == wrong }) { input in
            moved = try unlock(input, idleLock: inv.option("--idle-lock"))
        }
        return moved
    }

    /// Asks the daemon whether an unlock by device kind `method` (`fido2`, `tpm2`) can be tried:
    /// it has a slot of that kind and reaches the device. Asked before any PIN or touch.
    /// - Throws: ``CommandFailure`` with the daemon's reason (`no_slot`, `no_security_key`, `no_tpm`).
    func checkUnlock(method: String) throws {
        _ = try request("unlock-check", method: method)
    }

    /// Hands the daemon an unlock secret (it checks it itself and keeps the back-off).
    /// `idleLock`: this run's idle lock (`unlock --idle-lock`), applied by the daemon only when
    /// the unlock succeeds.
    /// - Returns: where the daemon's prompts ask from now on, when this unlock moved them there.
    @discardableResult
    func unlock(_ input: UnlockInput, idleLock: String? = nil) throws -> String? {
        // The method is the kind's name; a device kind's PIN goes framed (SlotKinds.unlockSecret reads it back).
        let wire = try input.take().wireForm()
        let reply = try wire.bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> JSONValue in
            try request("unlock", method: wire.method, secret: raw,
                        extra: promptSurroundings + (idleLock.map { [JSONMember(key: "idle_lock", value: .string($0))] } ?? []))
        }
        return reply["promptMoved"] == .bool(true) ? reply["prompt"]?.stringValue : nil
    }

    /// Where the daemon's presence prompts may appear from now on: this client's terminal (its
    /// standard input's, else `GPG_TTY`), `TERM`, and display. Sent with `unlock`; the daemon
    /// adopts them only when the unlock succeeds.
    var promptSurroundings: [JSONMember] {
        var env = ProcessInfo.processInfo.environment
        if isatty(0) == 1, let name = ttyname(0) { env["SITEKEEP_TTY"] = String(cString: name) }
        else if let gpg = env["GPG_TTY"], gpg.hasPrefix("/dev/") { env["SITEKEEP_TTY"] = gpg }
        return ControlServer.unlockPromptKeys.sorted { $0.key < $1.key }.compactMap { key, name in
            guard let value = env[name], !value.isEmpty, value.utf8.count <= 512 else { return nil }
            return JSONMember(key: key, value: .string(value))
        }
    }

    func lock() throws { _ = try request("lock") }


    /// Asks the daemon to stop (as SIGTERM: drain, lock, flush) and waits until its process is
    /// gone (up to 20 s); its pid.
    /// - Throws: ``CommandFailure`` when it refuses or is still there after the wait.
    func stop() throws -> Int64 {
        let reply = try request("stop")
        guard let pid = reply["pid"]?.intValue ?? self.pid, pid > 0, pid <= Int64(Int32.max) else {
            throw CommandFailure("the daemon did not say which process it is", code: "daemon")
        }
        let deadline = Clocks.monotonicNow() + .seconds(20)
        while Clocks.monotonicNow() < deadline {
            if !Self.isAlive(pid_t(pid)) { return pid }
            usleep(20_000)
        }
        throw CommandFailure("the daemon (pid \(pid)) was asked to stop and is still running after 20 s",
                             remedy: "see its log (daemon.log in the store, or 'journalctl --user -u sitekeep'); 'kill \(pid)' stops it the same way", code: "daemon")
    }

    /// Whether `pid` is a live process (a zombie, exited but not yet reaped, is gone).
    static func isAlive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    func isUnlocked() throws -> Bool { try request("status")["unlocked"] == .bool(true) }

    /// Starts `sitekeep serve` for the store of `inv`, detached (its own session, output to
    /// `daemon.log` in the store), and waits until it answers; the link to it.
    static func start(_ inv: Invocation) throws -> DaemonLink {
        guard let executable = Bundle.main.executablePath ?? CommandLine.arguments.first.map({ $0.hasPrefix("/") ? $0 : FileManager.default.currentDirectoryPath + "/" + $0 }) else {
            throw CommandFailure("cannot tell where the sitekeep executable is", remedy: "start the daemon yourself with 'sitekeep serve'", code: "no_daemon")
        }
        // Something already listening on the bridge socket (systemd's socket unit, or a daemon
        // still starting) is not a reason to start a second daemon, which could only say "already
        // listens": connecting has started the activated one, so wait for its control socket.
        if let bridge = try? DaemonSockets.bridge(environment: inv.environment), let fd = try? ControlClient.connect(path: bridge) {
            close(fd)
            let deadline = Clocks.monotonicNow() + .seconds(10)
            while Clocks.monotonicNow() < deadline {
                if let link = try find(inv) { return link }
                usleep(50_000)
            }
            throw CommandFailure("something listens on \(bridge) but no SiteKeep control socket answers beside it",
                                 remedy: "if it is systemd's sitekeep.socket, install the current units from tools/systemd (they pass control.sock too) and run 'systemctl --user daemon-reload && systemctl --user restart sitekeep.socket'; otherwise stop what listens there",
                                 code: "no_daemon")
        }
        var arguments = [executable, "serve", "--home", inv.settings.home, "--keyring", inv.settings.keyring]
        if let idle = inv.option("--idle-lock") { arguments += ["--idle-lock", idle] }
        let log = inv.settings.home + "/daemon.log"
        // tpm2-tss writes WARNING:esys lines of its own to stderr (daemon.log) on every TPM use;
        // SiteKeep reports the TPM's errors itself, in words. A TSS2_LOG the user set is kept.
        var environment = inv.environment
        if environment["TSS2_LOG"] == nil { environment["TSS2_LOG"] = "all+none" }
        let pid = try DaemonSpawn.detached(arguments, environment: environment, log: log)
        // Wait (up to 10 s) for its control socket to answer for this store.
        let deadline = Clocks.monotonicNow() + .seconds(10)
        while Clocks.monotonicNow() < deadline {
            if let link = try find(inv) { return link }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let tail = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").suffix(3).joined(separator: "; ") ?? ""
                throw CommandFailure("the daemon exited at start\(tail.isEmpty ? "" : ": " + tail)", remedy: "see \(log), or run 'sitekeep serve' to see why", code: "no_daemon")
            }
            usleep(20_000)
        }
        throw CommandFailure("the daemon did not answer within 10 s", remedy: "see \(log)", code: "no_daemon")
    }
}

/// Spawning the daemon detached from the terminal.
enum DaemonSpawn {
    /// Starts `arguments` in a new session with stdin from /dev/null and stdout/stderr appended
    /// to `log` (0600); returns its pid. The child is not waited for: it outlives this process.
    static func detached(_ arguments: [String], environment: [String: String], log: String) throws -> pid_t {
        do {
            let child = try ChildProcess.spawn(arguments[0], arguments: Array(arguments.dropFirst()),
                                               environment: environment.map { "\($0.key)=\($0.value)" },
                                               stdin: .null, stdout: .file(log, append: true), stderr: .standardOutput,
                                               detached: true)
            return child.pid
        } catch {
            throw CommandFailure("could not start the daemon (\(error.cause))", remedy: "start it yourself with 'sitekeep serve'", code: "no_daemon")
        }
    }
}
