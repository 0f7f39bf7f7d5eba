import Synchronization
import SiteKeepAgent
import SiteKeepCustody
import SiteKeepWiring
import SiteKeepSystem

/// The daemon's ssh-agent socket over its custodian.
enum SSHAgentService {
    /// Starts the agent socket at `path`, asking for presence through `presence` (the daemon's
    /// one verifier). When no prompt can be shown, that is logged at start and with the first
    /// refusal it causes, saying what to do, and not again for each refused signature.
    static func start(path: String, custodian: Custodian, presence verifier: any PresenceVerifier,
                      note: @escaping @Sendable (String) -> Void,
                      upstream: @escaping @Sendable () -> String? = { nil }) throws -> AgentSocketServer {
        if let prompt = verifier as? PromptPresenceVerifier {
            let plan = prompt.plan
            if let problem = plan.problem {
                note("ssh-agent: no presence prompt can be shown now (\(problem)); signatures are refused until one can: \(plan.remedy ?? "see 'sitekeep doctor'")")
            } else {
                note("ssh-agent: presence prompt: \(plan)")
            }
        }
        let keys = CustodyAgentKeys(custodian: custodian, presence: PresenceWindow(verifier: verifier, lockScope: custodian.lockScope),
                                    upstream: upstream)
        let lastUnavailable = Mutex<String?>(nil)
        let lastUpstream = Mutex<String?>(nil)
        let server = try AgentSocketServer(path: path, keys: keys) { peer, why in
            // The same "cannot ask" reason is said once, not for every refused signature.
            if case .presence(let reason) = why, reason.hasPrefix("cannot ask for presence") {
                guard lastUnavailable.withLock({ last in defer { last = reason }; return last != reason }) else { return }
            } else if case .upstream(let reason) = why, reason.contains("did not list") {
                // A listing still answers with SiteKeep's own keys; an absent other agent is
                // said once, not at every listing.
                guard lastUpstream.withLock({ last in defer { last = reason }; return last != reason }) else { return }
                note("ssh-agent: \(reason); only SiteKeep's own keys were listed to \(peer.label)")
                return
            } else {
                lastUnavailable.withLock { $0 = nil }
            }
            note("ssh-agent: refused a request from \(peer.label): \(why)")
            // An agent failure carries no text to ssh or git: the asker's own terminal is told.
            if case .locked = why, let tty = ControllingTerminal.of(pid: peer.pid) {
                ControllingTerminal.notify(tty, line: "SiteKeep is locked: run `sitekeep unlock` here, then try again")
            }
        }
        server.start()
        return server
    }
}
