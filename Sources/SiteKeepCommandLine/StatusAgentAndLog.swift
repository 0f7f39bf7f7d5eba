import Foundation
internal import SiteKeepAgent
internal import SiteKeepDaemon
internal import SiteKeepJSON

/// What `sitekeep status` says of the ssh-agent socket and of where the daemon logs: the two
/// places a user looks for when signing fails or the daemon misbehaves.
struct StatusAgentAndLog {
    /// The agent socket the daemon serves (or would), nil when none can be named.
    let agentSocket: String?
    /// Whether an agent answers there now.
    let agentAnswering: Bool
    /// Whether the ssh-agent setting is on (with its tag).
    let agentOn: Bool
    /// The daemon's log file in the store, when there is one (a daemon `unlock` started).
    let daemonLog: String?

    init(home: String, environment: [String: String]) {
        let settings = (try? DaemonSettings.load(home: home)) ?? DaemonSettings()
        agentOn = settings[.sshAgent] == "on" && !settings.untagged.contains(.sshAgent)
        let socket = settings[.sshAgentSocket]
        agentSocket = socket.isEmpty || settings.untagged.contains(.sshAgentSocket)
            ? DaemonSettings.defaultAgentSocket(environment: environment) : socket
        agentAnswering = agentSocket.map { AgentClient.isAnswering(path: $0) } ?? false
        let log = home + "/daemon.log"
        daemonLog = FileManager.default.fileExists(atPath: log) ? log : nil
    }

    var json: [JSONMember] {
        [JSONMember(key: "agentSocket", value: agentSocket.map { .string($0) } ?? .null),
         JSONMember(key: "agentAnswering", value: .bool(agentAnswering)),
         JSONMember(key: "daemonLog", value: daemonLog.map { .string($0) } ?? .null)]
    }

    /// The `agent` and `log` lines, `daemonRuns` telling why an agent that is on does not answer.
    func lines(daemonRuns: Bool) -> [String] {
        let agent: String
        if agentAnswering, let agentSocket {
            agent = "answering on \(agentSocket) (eval \"$(sitekeep agent env)\" points ssh there)"
        } else if agentOn {
            agent = "on, not answering" + (agentSocket.map { " on \($0)" } ?? "")
                + (daemonRuns ? ": see the daemon's log" : ": no daemon runs; 'sitekeep unlock' starts one")
        } else {
            agent = "off ('sitekeep config set ssh-agent on' serves team keys to ssh and git)"
        }
        let log = daemonLog ?? "no daemon.log in the store (a daemon systemd starts logs to 'journalctl --user -u sitekeep')"
        return ["agent      " + agent, "log        " + log]
    }
}
