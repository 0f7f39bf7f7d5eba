import Testing
import SiteKeepCore
import SiteKeepJSON

/// `notify.plan`'s leads, owned by the core.
@Suite struct ReminderLeadsTests {
    @Test func leadsAreWholeMinutesUpToADay() throws {
        let leads = try ReminderLeads(json: try JSONParser.parse(#"{"sessionLeadMinutes":5,"standupLeadMinutes":1440}"#), path: "args")
        #expect(leads == ReminderLeads(sessionMinutes: 5, standupMinutes: 1440))
        #expect(leads.applied(to: .standard).lead(for: .session) == 5 * 60_000)
        #expect(try ReminderLeads(json: try JSONParser.parse("{}"), path: "args").isEmpty)
        #expect(throws: CoreFieldError("args.sessionLeadMinutes", "is 1441; a lead is 0 to 1440 minutes")) {
            try ReminderLeads(json: try JSONParser.parse(#"{"sessionLeadMinutes":1441}"#), path: "args")
        }
        #expect(throws: CoreFieldError("args.standupLeadMinutes", "is -1; a lead is 0 to 1440 minutes")) {
            try ReminderLeads(json: try JSONParser.parse(#"{"standupLeadMinutes":-1}"#), path: "args")
        }
        #expect(throws: CoreFieldError("args.standupLeadMinutes", "must be whole minutes, found number")) {
            try ReminderLeads(json: try JSONParser.parse(#"{"standupLeadMinutes":2.5}"#), path: "args")
        }
    }
}
