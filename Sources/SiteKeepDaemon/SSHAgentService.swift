import SiteKeepAgent
import SiteKeepCustody

/// The daemon's ssh-agent socket over its custodian.
enum SSHAgentService {
    /// Starts the agent socket at `path`; presence through `$SITEKEEP_ASKPASS` (without it,
    /// keys are listed but every signature is refused with a note saying why).
    static func start(path: String, custodian: Custodian, environment: [String: String],
                      note: @escaping @Sendable (String) -> Void) throws -> AgentSocketServer {
        let verifier: any PresenceVerifier
        do {
            verifier = try AskpassPresenceVerifier.fromEnvironment(environment)
        } catch {
            note("ssh-agent: \(error); signatures will be refused until the daemon is started with it")
            // The reason alone: the refusal adds "cannot ask for presence: " itself (it was said twice).
            if case .presenceUnavailable(let why) = error { verifier = UnavailablePresence(reason: why) } else {
                verifier = UnavailablePresence(reason: error.description)
            }
        }
        let keys = CustodyAgentKeys(custodian: custodian, presence: WindowedAgentPresence(verifier: verifier, lockScope: custodian.lockScope))
        let server = try AgentSocketServer(path: path, keys: keys) { peer, why in
            note("ssh-agent: refused a request from \(peer.label): \(why)")
        }
        server.start()
        return server
    }
}

/// A presence verifier that always refuses, saying why (no askpass program is configured).
struct UnavailablePresence: PresenceVerifier {
    let reason: String
    func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        throw .presenceUnavailable(reason)
    }
}
