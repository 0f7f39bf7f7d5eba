import Foundation
internal import SiteKeepBridge
internal import SiteKeepJSON
internal import SiteKeepPartitions
internal import SiteKeepDaemon
import SiteKeepVocabulary

/// `ops` and `call`: the bridge's op catalogue, and a client for scripts and debugging.
enum BridgeCommands {
    static var all: [CommandSpec] { [ops, call] }

    static let ops = CommandSpec(
        path: ["ops"],
        summary: "Print the bridge's op catalogue: every op with its policy, and which sites have it by catalogue and by grant",
        discussion: "The catalogue is one file (ops.json) loaded and validated at start; --markdown prints the document kept in docs/OPS.md. With a store, each op also lists the sites the user granted it to ('sitekeep site grant'); GRANTABLE says which ops a grant may open.",
        options: [.flag("--markdown", "print the Markdown document instead of a table")],
        examples: [CommandExample("sitekeep ops", "list the ops and who may call them"),
                   CommandExample("sitekeep ops --markdown", "the catalogue as docs/OPS.md has it")]
    ) { inv in
        let catalogue = try OpCatalogue.bundled()
        if inv.flag("--markdown") {
            inv.io.write(catalogue.markdown())
            return
        }
        // The store's grants, read from sites.json without opening a key (none without a store).
        let sites = StoreContext.exists(home: inv.settings.home)
            ? try SiteRegistry.sites(inHome: URL(fileURLWithPath: inv.settings.home)) : []
        func grantedTo(_ op: OpPolicy) -> [Site] {
            op.direction == .request && op.grantable ? sites.filter { $0.isAppBound && $0.grants.contains(op.name) } : []
        }
        func label(_ s: Site) -> String { s.origins.first?.serialized ?? s.displayName }
        inv.emit(.object([
            JSONMember(key: "protocolVersion", value: .integer(catalogue.protocolVersion)),
            JSONMember(key: "ops", value: .array(catalogue.ops.map { op in
                ["name": .string(op.name), "version": .integer(op.version), "direction": .string(op.direction.rawValue),
                 "sites": .array(op.sites.map { .string($0.description) }), "presence": .bool(op.presence),
                 "maxRequestBytes": .integer(op.maxRequestBytes), "grantable": .bool(op.grantable),
                 "grantedTo": .array(grantedTo(op).map { s in
                     ["id": .string(s.id.string), "name": .string(s.displayName), "origin": .string(label(s))]
                 })]
            })),
        ])) {
            "bridge protocol version \(catalogue.protocolVersion)\n" + Table(headers: ["OP", "DIRECTION", "PRESENCE", "GRANTABLE", "SITES (CATALOGUE)", "GRANTED TO"], rows: catalogue.ops.map { op in
                [op.name, op.direction.rawValue, op.presence ? "yes" : "", op.grantable ? "yes" : "",
                 op.sites.map(\.description).joined(separator: " "), grantedTo(op).map(label).joined(separator: " ")]
            }).render { inv.style($0, .bold) }
        }
    }

    static let call = CommandSpec(
        path: ["call"],
        summary: "Call one bridge op on the running daemon, as a site would (for scripts and debugging)",
        discussion: """
        Connects to the daemon's socket ($SITEKEEP_SOCK, else $XDG_RUNTIME_DIR/sitekeep/bridge.sock), \
        binds the connection to --site with a hello, then sends OP with --args. The site is the \
        connection's, never a parameter: the daemon checks the op against that site's allow-list.
        """,
        arguments: [ArgumentSpec("OP", "the op, e.g. storage.get")],
        options: [.option("--site", value: "ORIGIN", "the origin to bind the connection to (e.g. https://promptugal.news), or the site's name or id"),
                  .option("--args", value: "JSON", "the op's arguments as a JSON object (default {})")],
        examples: [CommandExample("sitekeep call storage.get --site https://promptugal.news --args '{\"key\":\"nr.schedule.v1\"}'", "read a site's storage through the daemon"),
                   CommandExample("sitekeep call hello --site https://promptugal.news", "the ops this site may call")]
    ) { inv in
        let op = try inv.requiredArgument("OP")
        guard var site = inv.option("--site") else { throw UsageError("call needs --site ORIGIN (the connection is bound to one site)", command: inv.spec.commandLine) }
        if !site.contains("://") {
            // A site's name or id: the hello still names an origin, the site's first.
            let named = try SiteCommands.site(site, in: try SiteCommands.registry(try StoreContext.open(inv)), command: inv.spec.commandLine)
            guard let origin = named.origins.first?.serialized else { throw CommandFailure("\(named.displayName) has no origin", code: "not_found") }
            site = origin
        }
        var args: JSONValue = .object([])
        if let text = inv.option("--args") {
            do { args = try JSONParser.parse(text, limits: .message) } catch {
                throw UsageError("--args is not valid JSON: \(error)", command: inv.spec.commandLine)
            }
        }
        let path = try DaemonSockets.bridge(environment: inv.environment)
        let client: BridgeClient
        do { client = try BridgeClient.connect(path: path, timeout: .seconds(90)) } catch {
            throw CommandFailure("no daemon answers at \(path)", remedy: "start it with 'sitekeep unlock' (or point SITEKEEP_SOCK at the daemon's bridge socket)", code: "no_daemon")
        }
        defer { client.close() }
        do {
            let hello = try client.hello(origin: site)
            let result: JSONValue = op == "hello"
                ? ["version": .integer(hello.version), "ops": .array(hello.ops.map { .string($0) })]
                : try client.call(op, args: args)
            inv.io.write(JSONSerializer.string(result, style: .pretty) + "\n")
        } catch BridgeError.reply(let failure) {
            throw CommandFailure("\(op) was refused: \(failure.message)", code: failure.code.rawValue)
        }
    }
}
