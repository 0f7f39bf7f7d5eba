#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import SiteKeepBridge
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepVocabulary

/// What the control socket does: `status`, `lock`, `unlock`, `unlock-check` (whether a device
/// unlock can be tried: its slot and device, before the client asks for a PIN or a touch), `stop` (as SIGTERM: drain, lock,
/// flush, exit), `set` (a setting of this run only), and `sites` (the app-bound sites for a
/// web-view host: id, name, origins and the folder it keeps the site's web data in; no secrets,
/// and it works while locked). The control socket has already refused peers of another user and
/// requests naming another store.
enum ControlOps {
    /// The ops about the daemon itself (`stop`, `set`); nil for the others.
    static func handleDaemon(_ request: ControlServer.Request, daemon: Daemon) -> JSONValue? {
        switch request.op {
        case "stop":
            // Answered first: the stop closes the control socket after running requests finish.
            guard daemon.willStop() else {
                return ["ok": false, "code": "hosted", "error": "this daemon runs inside a host process, which stops it itself"]
            }
            return ["ok": true, "pid": .int(Int64(getpid()))]
        case "set":
            guard request.header["key"]?.stringValue == DaemonSettings.Key.idleLock.rawValue,
                  let text = request.header["value"]?.stringValue, let seconds = IdleLock.seconds(parsing: text) else {
                return ["ok": false, "code": "bad_request", "error": "set takes key idle-lock and a duration from 1s to 1d"]
            }
            // Shortening narrows and needs nothing; lengthening keeps keys usable longer, which
            // only the holder of the secret may ask for (`sitekeep unlock --idle-lock`, which
            // sends it, or `config set idle-lock` with an approval).
            let current = Int(daemon.store.custodian.idleLifetime.components.seconds)
            guard seconds <= current else {
                return ["ok": false, "code": "needs_secret",
                        "error": .string("a longer idle lock (\(text), now \(current) s) needs the secret: run 'sitekeep unlock --idle-lock \(text)', or 'sitekeep config set idle-lock \(text)' to keep it")]
            }
            daemon.overrideIdleLock(seconds: seconds, how: "--idle-lock \(text) (set)")
            return ["ok": true, "seconds": .int(Int64(seconds))]
        default:
            return nil
        }
    }

    /// The reply code of a refused `unlock-check`.
    static func deviceCheckCode(_ error: CustodyError) -> String {
        switch error {
        case .noDeviceSlot: "no_slot"
        case .fido2: "no_security_key"
        case .tpm: "no_tpm"
        default: "bad_request"
        }
    }

    static func handle(_ request: ControlServer.Request, secret: UnsafeRawBufferPointer?, custodian: Custodian,
                       registry: SiteRegistry, home: String) -> JSONValue {
        let method = request.method
        switch request.op {
        case "sites":
            var list: [JSONValue] = []
            for site in registry.authenticSites() where site.isAppBound {
                guard let folder = try? registry.webFolder(forIdentifier: site.id) else {
                    return ["ok": false, "error": .string("cannot create the web folder of \(site.displayName)")]
                }
                list.append(["id": .string(site.id.string), "name": .string(site.displayName),
                             "origins": .array(site.origins.map { .string($0.serialized) }), "webFolder": .string(folder)])
            }
            return ["ok": true, "sites": .array(list)]
        case "status":
            return ["ok": true, "unlocked": .bool(custodian.isUnlocked), "store": .string(custodian.storeID), "home": .string(home),
                    "pid": .int(Int64(getpid()))]
        case "lock":
            custodian.lock()
            return ["ok": true]
        case "unlock-check":
            // Before a client asks its user for a device's PIN or a touch: this daemon's own
            // custodian says whether its slot and its device are there (its environment and
            // settings name the device; the client's may not).
            guard let method else { return ["ok": false, "code": "bad_request", "error": "unlock-check names the unlock method"] }
            do throws(CustodyError) {
                try custodian.checkUnlockDevice(method: method)
                return ["ok": true]
            } catch {
                return ["ok": false, "code": .string(Self.deviceCheckCode(error)), "error": .string(error.description)]
            }
        case "unlock":
            guard let secret, secret.count > 0 else { return ["ok": false, "code": "no_secret", "error": "no unlock secret was sent"] }
            do throws(CustodyError) {
                // The method names a slot kind; the kinds say how its secret is framed.
                let unlockSecret: UnlockSecret
                do throws(CustodyError) {
                    guard let method, let given = try custodian.configuration.slotKinds.unlockSecret(method: method, wireBytes: secret) else {
                        return ["ok": false, "error": "unknown unlock method"]
                    }
                    unlockSecret = given
                } catch .invalidArgument {
                    return ["ok": false, "error": .string("bad \(method ?? "") unlock request")]
                } catch .crypto {
                    return ["ok": false, "error": "unlock failed"]
                }
                try custodian.unlock(unlockSecret)
                return ["ok": true, "unlocked": true]
            } catch {
                return ["ok": false, "code": "unlock_failed", "error": .string(error.description)]
            }
        default:
            return ["ok": false, "code": "bad_request", "error": "unknown control op"]
        }
    }
}
