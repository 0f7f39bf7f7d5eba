#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepBridge
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepPartitions

/// What the control socket does: `status`, `lock`, `unlock`, and `sites` (the app-bound sites
/// for a web-view host: id, name, origins and the folder it keeps the site's web data in; no
/// secrets, and it works while locked).
enum ControlOps {
    static func handle(_ request: ControlServer.Request, secret: UnsafeRawBufferPointer?, custodian: Custodian,
                       registry: SiteRegistry, home: String) -> JSONValue {
        let method = request.method
        switch request.op {
        case "sites":
            var list: [JSONValue] = []
            for site in registry.sites() where site.isAppBound {
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
        case "unlock":
            guard let secret, secret.count > 0 else { return ["ok": false, "code": "no_secret", "error": "no unlock secret was sent"] }
            do {
                let bytes = try SecretBytes(copying: secret)
                let unlockSecret: UnlockSecret
                switch method {
                case "passphrase": unlockSecret = .passphrase(bytes)
                case "prf": unlockSecret = .prf(bytes)
                case "recovery": unlockSecret = .recoveryCode(bytes)
                default: return ["ok": false, "error": "unknown unlock method"]
                }
                try custodian.unlock(unlockSecret)
                return ["ok": true, "unlocked": true]
            } catch let e as CustodyError {
                return ["ok": false, "code": "unlock_failed", "error": .string(e.description)]
            } catch {
                return ["ok": false, "error": "unlock failed"]
            }
        default:
            return ["ok": false, "code": "bad_request", "error": "unknown control op"]
        }
    }
}
