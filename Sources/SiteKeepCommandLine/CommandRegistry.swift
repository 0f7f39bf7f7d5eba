/// Every command `sitekeep` knows, gathered from one list per command group.
public enum CommandRegistry {
    /// All leaf commands, in the order help lists them.
    public static var all: [CommandSpec] {
        BasicCommands.all + CustodyCommands.all + SiteCommands.all + SiteHostCommands.all + VaultCommands.all + CoreCommands.all + BridgeCommands.all + AgentCommands.all + LaunchCommands.all + DaemonCommands.all + ConfigCommands.all + DocumentationCommands.all
    }
}
