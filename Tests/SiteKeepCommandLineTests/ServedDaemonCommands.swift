import SiteKeepTestSupport

/// This target's command line (in-process) as a served daemon is unlocked and locked with
/// (test support's ``ServedDaemon``).
let daemonTool: ServedDaemon.Tool = { arguments, environment in await runTool(arguments, environment: environment) }
