import Foundation
public import SiteKeepKeyring
public import SiteKeepSocket

/// How a ``Daemon`` runs: what the command line's `serve` options set, and what a host sets in code.
public struct DaemonOptions: Sendable {
    /// Where the daemon reads `SITEKEEP_SOCK`, `XDG_RUNTIME_DIR`, `LISTEN_FDS`, `SITEKEEP_ASKPASS`,
    /// `SITEKEEP_NOTIFY` and the session bus from.
    public var environment: [String: String]
    /// The keyring to open the store with (`auto` follows what the store recorded).
    public var keyring: KeyringChoice = .auto
    /// Lock after this long unused (like `ssh-add -t`).
    public var idleLockSeconds: Int = IdleLock.defaultSeconds
    /// The team key `identity.get` reports; nil: the first team key.
    public var teamKeyID: String?
    /// Sync the vaults that have a remote this often while unlocked, and at unlock; 0: never.
    public var syncIntervalSeconds: Int = 300
    /// Treat the network as metered: no background sync.
    public var metered = false
    /// Lock when the login session locks (the `lock-on-session-lock` setting; default on).
    public var lockOnSessionLock = true
    /// The settings a command-line option or the environment set for this run only, and how
    /// (`--idle-lock 5m`, `SITEKEEP_SSH_AGENT=1`): `config` reports them, and a setting changed
    /// while the daemon runs says it is overridden.
    public var overrides: [DaemonSettings.Key: String] = [:]
    /// The bridge socket; nil: the socket systemd passed (`LISTEN_FDS`), else `$SITEKEEP_SOCK`,
    /// else `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`. The control socket goes beside it.
    public var bridgeSocket: String?
    /// Also serve the ssh-agent protocol over the team keys on this socket; nil: no agent.
    public var sshAgentSocket: String?
    /// How the daemon asks the user to approve a key use (the `prompt` setting): nil or "auto"
    /// (the first that works of $SITEKEEP_ASKPASS, $SSH_ASKPASS, the system's pinentry, a
    /// terminal prompt), "pinentry", "pinentry:/ABS/PATH", "terminal", "askpass:/ABS/PATH".
    public var prompt: String?
    /// Whether a key use while locked asks for the unlock on the prompt (the `unlock-on-use`
    /// setting; default on), as gpg-agent asks for a passphrase; off refuses it.
    public var unlockOnUse = true
    /// The one slot kind a locked use unlocks with (`passphrase`, `fido2`, `tpm2`: the setting
    /// named it); nil: the passphrase, else a security key or the TPM.
    public var unlockOnUseKind: String?
    /// Where the daemon's messages go (one line each, without a trailing newline).
    public var log: @Sendable (String) -> Void = { _ in }
    /// Runs a client's whole command inside the daemon (the control socket's `run`, as the
    /// command line forwards it) against the daemon's open store; nil refuses `run`.
    public var runCommand: (@Sendable (ControlServer.Request, SocketConnection, OpenStore) -> Void)?

    /// - Parameter environment: nil reads this process's environment.
    public init(environment: [String: String]? = nil) {
        self.environment = environment ?? ProcessInfo.processInfo.environment
    }

    /// Takes the settings stored with the store (``DaemonSettings``): every way a daemon starts
    /// calls this first, then applies its command line's options over it (``overrides``).
    /// - Parameter agentSocket: where the agent listens when the settings name no socket.
    public mutating func apply(_ settings: DaemonSettings, agentSocket defaultAgentSocket: String?) {
        idleLockSeconds = IdleLock.seconds(parsing: settings[.idleLock]) ?? IdleLock.defaultSeconds
        syncIntervalSeconds = DaemonSettings.syncSeconds(settings[.syncInterval]) ?? 300
        metered = settings[.metered] == "on"
        lockOnSessionLock = settings[.lockOnSessionLock] == "on"
        prompt = settings[.prompt]
        unlockOnUse = settings[.unlockOnUse] != "off"
        unlockOnUseKind = ["on", "off"].contains(settings[.unlockOnUse]) ? nil : settings[.unlockOnUse]
        let socket = settings[.sshAgentSocket]
        sshAgentSocket = settings[.sshAgent] == "on" ? (socket.isEmpty ? defaultAgentSocket : socket) : nil
    }
}
