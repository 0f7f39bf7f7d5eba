public import SiteKeepVault
public import SiteKeepCustody
public import SiteKeepCrypto
import Synchronization

/// The door as a vault on the vault server (docs/door.md): an ordinary sgit vault whose id and
/// keys derive from the door's secret (``DoorSecret/vaultKeys(lockScope:)``), holding the three
/// files of ``DoorFiles``. Publishing clones the vault id (empty the first time), commits the
/// files on this device's clone branch, signed by the device key, and pushes; fetching clones
/// into a scratch folder with a throw-away signer (it commits nothing) and reads the files.
public enum DoorVault {
    /// Makes (or replaces the files of) the door at `server`: clone into `folder` (new or
    /// empty), commit the three files, push.
    /// - Returns: The push's outcome (the remote's new head).
    /// - Throws: ``VaultError`` from the clone, commit or push.
    public static func publish(_ files: DoorFiles, server: String, keys: SgitKeys, credentials: any RemoteCredentials,
                               folder: String, signer: any CommitSigner) throws(VaultError) -> PushOutcome {
        let remote = try SGSendRemote(baseURL: server, vaultID: keys.vaultID, credentials: credentials)
        let (vault, _) = try Vault.clone(from: remote, into: folder, keys: keys, signer: signer)
        var changes: [(VaultPath, VaultChange)] = []
        for (path, bytes) in zip(DoorFiles.paths, [files.slot, files.master, files.keySet]) {
            changes.append((try VaultPath(validating: path), .write(bytes)))
        }
        _ = try vault.commit(changes, message: "SiteKeep door", signer: signer, checkoutWhenAdopting: false)
        return try vault.push(to: remote, signer: signer)
    }

    /// The door's files at `server`, read through a clone into `scratch` (new or empty; the
    /// caller removes it). Every object id and commit signature is verified as any clone's.
    /// - Returns: nil when the server holds nothing under the door's vault id (no door for this
    ///   secret there).
    /// - Throws: ``VaultError`` from the clone (a flipped object, a server that answers with
    ///   objects of another vault); ``VaultError/notFound(path:)`` when a door file is missing.
    public static func fetch(server: String, keys: SgitKeys, credentials: any RemoteCredentials, scratch: String) throws(VaultError) -> DoorFiles? {
        let remote = try SGSendRemote(baseURL: server, vaultID: keys.vaultID, credentials: credentials)
        let (vault, outcome) = try Vault.clone(from: remote, into: scratch, keys: keys, signer: try ReadOnlySigner())
        if outcome.remoteHeldNothing { return nil }
        var read: [[UInt8]] = []
        for path in DoorFiles.paths { read.append(try vault.read(path: path)) }
        return DoorFiles(slot: read[0], master: read[1], keySet: read[2])
    }

    /// The signer of a door being read: its clone branch is local and never committed to, so
    /// it needs a public key and signs nothing (the private half is dropped with it).
    struct ReadOnlySigner: CommitSigner {
        let der: [UInt8]
        init() throws(VaultError) {
            do { der = try P256.Signing.PrivateKey().publicKey.derRepresentation } catch { throw .signingFailed("key generation failed") }
        }
        func publicKeyDER() throws(VaultError) -> [UInt8] { der }
        func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8] { throw .signingFailed("a door being read commits nothing") }
    }
}

/// Credentials for the door when no store holds them yet (`init --restore`): the access token
/// given for the command, held in guarded memory, and the door's write key.
public final class GivenCredentials: RemoteCredentials {
    private let token: Mutex<SecretBytes?>
    private let keys: SgitKeys

    /// `token` (nil: the server needs none) and the door's `keys`.
    public init(token: consuming sending SecretBytes?, keys: SgitKeys) {
        self.token = Mutex(token)
        self.keys = keys
    }

    public func accessToken() throws(VaultError) -> String? {
        guard let bytes = try accessTokenBytes() else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    public func accessTokenBytes() throws(VaultError) -> [UInt8]? {
        token.withLock { t in
            switch t {
            case .some(let s): return s.withUnsafeBytes { Array($0) }
            case .none: return nil
            }
        }
    }

    public func writeKeyHex() throws(VaultError) -> String? { keys.writeKeyHex() }
}
