import SiteKeepAgent
import SiteKeepWiring

/// The agent socket systemd passed while the `ssh-agent` setting is off: it answers (so `ssh`
/// never waits on a socket nobody serves) with no keys, and refuses every signature saying how
/// to turn the agent on.
struct AgentOff: AgentKeySource {
    var cryptography: any SSHCryptography { CryptoSSHCryptography() }
    func identities() -> [AgentIdentity] { [] }
    func sign(_ request: AgentSignRequest) throws(AgentRefusal) -> [UInt8] {
        throw .policy("the SiteKeep ssh-agent is off; turn it on with 'sitekeep config set ssh-agent on'")
    }
}
