public import SiteKeepJSON

extension OpCatalogue {
    /// The catalogue as Markdown: the op document committed as `docs/OPS.md`
    /// (`sitekeep ops --markdown` prints the same; a test keeps the file in step).
    public func markdown() -> String {
        var md = """
        # SiteKeep bridge ops

        Generated from `Sources/SiteKeepBridge/ops.json` by `OpCatalogue.markdown()`; do not edit by hand
        (`sitekeep ops --markdown > docs/OPS.md`). Protocol version **\(protocolVersion)**.

        ## Transport and framing

        - A Unix stream socket at `$SITEKEEP_SOCK`, else `$XDG_RUNTIME_DIR/sitekeep/bridge.sock` (folder 0700,
          socket 0600), or the socket systemd passes (`tools/systemd/sitekeep.socket`). Only processes of the
          daemon's own user are served (`SO_PEERCRED`); others get one `forbidden_peer` frame and are closed.
        - Only a site's **hosts** bind it: `hello` is answered `forbidden_host` unless the connecting process
          runs the SiteKeep browser installed beside the daemon or a program the user added for the site
          (`sitekeep site host add SITE PATH`), as read from `/proc` when the connection is accepted and
          again at `hello`, and loads no code it does not name (no `LD_PRELOAD`, `LD_LIBRARY_PATH`, …).
        - **Newline-delimited JSON**: every frame is one compact JSON value in UTF-8 followed by `\\n` (a `\\r`
          before it is ignored; empty lines are skipped). JSON never needs a raw newline, since strings escape it.
        - A frame is at most \(JSONLimits.message.maxBytes) bytes (and at most the op's `maxRequestBytes`); nesting
          at most \(JSONLimits.message.maxDepth) deep, strings at most \(JSONLimits.message.maxStringBytes) bytes, at most
          \(JSONLimits.message.maxElements) elements per array or object. A longer frame is skipped up to its newline and
          answered with `too_large` (id `null`); a malformed one with `bad_request`. The connection goes on in both cases.
        - Replies come in request order on a connection; events may arrive between them.

        ## Messages

        ```
        request   {"v": \(protocolVersion), "id": "a1", "op": "storage.get", "args": {"key": "k"}}            (+ optional "origin")
        success   {"id": "a1", "ok": true, "result": {"value": "…"}}
        failure   {"id": "a1", "ok": false, "error": {"code": "not_allowed", "message": "…"}}
        event     {"event": "schedule.changed", "data": {"v": 1, "picks": […]}}
        ```

        - `id` is a string of at most 128 bytes or an integer; it is echoed (`null` when the frame could not be read).
        - `args` may be omitted for `{}`. Members not listed for the op are refused (`unknown_field`), in the
          envelope and in `args`.
        - **The site is never a parameter.** The first message of a connection is `hello` with `args.origin` (the
          web-view host passes the frame origin); it binds the connection to that origin's site, which must be
          app-bound. A later message may carry `origin`; if it names another site it is refused with
          `forbidden_origin` and the connection stays bound and goes on serving. If the site itself is
          removed, or its origins or app-bound flag change, while the connection is open, the next
          message is refused with `forbidden_origin` and the daemon closes the connection.
        - Presence (`presence: yes`): before the key is used, custody's one gate (in the same call) must have a presence
          proof for this site, this op and the key in `args.key` (when the op names one), no older than 60 s (CLOCK_BOOTTIME);
          otherwise `presence_required` or `presence_denied`. An approval serves only the same site, op and key;
          lock and unlock forget every approval. A request that cannot run (op not allowed or not configured, bad
          args, `args.key` not a key id; for `key.sign` also an unknown key or SiteKeep locked) is refused before
          anyone is asked.
        - Rate limits are token buckets per connection and op: `burst` calls at once, refilled at `per second`.
        - Replies never contain key material: handlers return plain JSON values and no key type converts to one.
        - Vault ops answer for the vaults of the connection's site only (`sitekeep vault add … --site ORIGIN`).
          A vault of another site, or of no site, answers `not_found` with the same message as a name that
          does not exist. Without `args.vault` the site's only vault, or its vault named `default`, is meant.
          A HEAD that is not signed by a signer the store trusts answers `vault_unverified`.
        - `sealed.open` envelopes: `sitekeep.sealed.v1.<team id>.<Base64url(nonce ‖ ciphertext ‖ tag)>`,
          XChaCha20-Poly1305 under the team content key custody holds, associated data
          `"sitekeep.sealed.v1" NUL <team id>`. The op answers `not_configured` until custody provides that key.

        ## Error codes

        | code | meaning |
        |---|---|

        """
        for c in BridgeErrorCode.allCases { md += "| `\(c.rawValue)` | \(c.meaning) |\n" }
        md += """

        ## Grants

        An op's `sites` is the catalogue's allow-list. The user may open an op marked `grantable` to one more
        app-bound site with `sitekeep site grant SITE OP…` (with their approval, recorded in the audit log) and take
        it back with `sitekeep site revoke SITE OP…`. A grant opens the allow-list for that site alone; the op keeps
        its presence, size and rate limits. The daemon reads the grants from the site registry on every call, so a
        grant or revoke applies to the next message, and `hello` lists the granted ops. `hello` and events are never
        grantable (`grantable` is `false`, or absent, which means the same); `sitekeep ops` shows each op's grants.

        """
        md += "\n## Ops\n\n| op | v | direction | sites | grantable | presence | max request | rate (burst, per second) |\n|---|---|---|---|---|---|---|---|\n"
        for op in ops {
            let sites = op.sites.map { "`\($0)`" }.joined(separator: " ")
            let req = op.direction == .request
            md += "| [`\(op.name)`](#\(op.name.replacingDots())) | \(op.version) | \(op.direction.rawValue) | \(sites) | \(op.grantable ? "yes" : "no") | "
            md += req ? "\(op.presence ? "yes" : "no") | \(op.maxRequestBytes) | \(op.rateLimit.burst), \(Self.number(op.rateLimit.perSecond)) |\n" : "– | – | – |\n"
        }
        md += "\n`\(SiteRule.appBoundToken)`: every app-bound site, each on its own partition only.\n"

        for op in ops {
            md += "\n### \(op.name)\n\n\(op.summary)\n\n"
            if let u = op.unsupportedMessage { md += "Answers `unsupported`: \"\(u)\".\n\n" }
            if op.direction == .request {
                md += "**args**\n\n" + Self.table(op.args) + "\n**result**\n\n" + Self.table(op.result)
            } else {
                md += "**data**\n\n" + Self.table(op.result)
            }
        }
        return md
    }

    private static func table(_ schema: FieldSchema) -> String {
        guard !schema.fields.isEmpty else { return "`{}`\n" }
        var t = "| field | type | required | limits | notes |\n|---|---|---|---|---|\n"
        func rows(_ s: FieldSchema, prefix: String) {
            for f in s.fields {
                let path = prefix + f.name
                t += "| `\(path)` | \(typeName(f.schema)) | \(f.schema.required ? "yes" : "no") | \(limits(f.schema)) | \(f.schema.summary ?? "") |\n"
                if f.schema.kind == .object { rows(f.schema, prefix: path + ".") }
                if f.schema.kind == .array, let item = f.schema.items.first, item.kind == .object { rows(item, prefix: path + "[].") }
            }
        }
        rows(schema, prefix: "")
        return t
    }

    private static func typeName(_ s: FieldSchema) -> String {
        var n = s.kind.rawValue
        if s.kind == .array, let item = s.items.first { n = "array of \(item.kind.rawValue)" }
        return s.nullable ? n + " or null" : n
    }

    private static func limits(_ s: FieldSchema) -> String {
        var l: [String] = []
        if let m = s.maxLength { l.append(s.kind == .base64 ? "≤ \(m) bytes decoded" : "≤ \(m) bytes") }
        if let m = s.maxItems { l.append("≤ \(m) items") }
        if let item = s.items.first, let m = item.maxLength { l.append("items ≤ \(m) bytes") }
        if let m = s.minimum { l.append("≥ \(m)") }
        if let m = s.maximum { l.append("≤ \(m)") }
        if let a = s.allowed { l.append(a.map { "`\($0)`" }.joined(separator: ", ")) }
        return l.joined(separator: "; ")
    }

    private static func number(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }
}

extension String {
    fileprivate func replacingDots() -> String { String(map { $0 == "." ? "-" : $0 }).lowercased() }
}

extension FieldSchema {
    /// A small value that satisfies this schema (the first enum value, the minimum, one element…),
    /// for probes, fuzz seeds and documentation examples.
    public func sample() -> JSONValue {
        switch kind {
        case .any: return .null
        case .string: return .string(allowed?.first ?? "x")
        case .base64: return .string("AAEC")
        case .integer: return .int(minimum ?? max(0, min(1, maximum ?? 1)))
        case .number: return .double(0.5)
        case .boolean: return .bool(true)
        case .array: return .array(items.first.map { [$0.sample()] } ?? [])
        case .object: return .object(fields.map { JSONMember(key: $0.name, value: $0.schema.sample()) })
        }
    }
}
