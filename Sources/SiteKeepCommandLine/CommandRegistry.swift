/// Every command `sitekeep` knows, gathered from one list per command group.
public enum CommandRegistry {
    /// All leaf commands, in the order help lists them: gathered once per process (the daemon
    /// runs many commands; each looks its command up here, not in a table built again).
    public static let all: [CommandSpec] =
        BasicCommands.all + CustodyCommands.all + SiteCommands.all + SiteHostCommands.all + VaultCommands.all + DoorCommands.all + CoreCommands.all + LaneCommands.all + BridgeCommands.all + AgentCommands.all + LaunchCommands.all + DaemonCommands.all + ConfigCommands.all + DocumentationCommands.all
}
