import CoffeeLogging
import Foundation
import Testing

@testable import CoffeeService

@Suite("Configuration (docs/protocol.md §7)", .timeLimit(.minutes(2)))
struct ConfigurationTests {
    func parse(_ json: String) throws -> ServiceConfiguration {
        try ConfigurationLoader.parse(Data(json.utf8), file: "c.json", relativeTo: "/etc/ct")
    }

    func message(_ json: String) -> String {
        do {
            _ = try parse(json)
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func shippedFileHoldsTheDefaults() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../config/coffee-tracker.json").standardized
        let c = try ConfigurationLoader.load(path: url.path)
        #expect(c.query.bind == ["tcp://127.0.0.1:5557"])
        #expect(c.ingest.bind == ["tcp://127.0.0.1:5555"] && c.updates.bind == ["tcp://127.0.0.1:5556"])
        #expect(c.model.halfLifeHours == 5 && c.publish.modelIntervalMs == 100 && c.publish.refreshIntervalS == 60)
        #expect(c.limits.maxMessageBytes == 1_048_576 && c.limits.maxFileBytes == 268_435_456)
        #expect(c.dataDirectory.hasSuffix("/data") && !c.dataDirectory.contains("config"))
    }

    @Test func emptyObjectGivesDefaultsWithPathsBesideTheFile() throws {
        let c = try parse("{}")
        #expect(c.dataDirectory == "/etc/data")
        #expect(c.inboxDirectory == "/etc/inbox")
        #expect(c.log.level == .info && c.log.format == .text)
        #expect(try parse(#"{"dataDirectory": "/var/lib/ct"}"#).dataDirectory == "/var/lib/ct")
    }

    /// A store in PostgreSQL (docs/protocol.md §11) needs its conninfo, is
    /// no standby's (PostgreSQL's own replication is), and names no password.
    @Test func aStoreInPostgreSQLNeedsItsConninfoAndNoFollow() throws {
        #expect(message(#"{"store": {"postgresql": {}}}"#).contains("store.postgresql.conninfo is required"))
        #expect(message(#"{"store": {"postgresql": {"conninfo": 5}}}"#).contains("store.postgresql.conninfo"))
        #expect(message(#"{"store": {"postgresql": {"dbname": "x"}}}"#).contains("dbname"))
        let follow = #""follow": {"query": "ipc:///q", "updates": "ipc:///u"}"#
        #expect(
            message(#"{"store": {"postgresql": {"conninfo": "dbname=x"}}, \#(follow)}"#)
                .contains("follow cannot be used with store.postgresql"))
        let c = try parse(#"{"store": {"postgresql": {"conninfo": "host=db password=s3cret dbname=x"}}}"#)
        #expect(c.storeName == "PostgreSQL (host=db password=… dbname=x)")
        let uri = try parse(#"{"store": {"postgresql": {"conninfo": "postgresql://me:s3cret@db/x"}}}"#)
        #expect(uri.storeName == "PostgreSQL (postgresql://me:…@db/x)")
    }

    @Test func valuesAreRead() throws {
        let c = try parse(
            #"{"model": {"halfLifeHours": 3.5, "timeZone": "Europe/Berlin"}, "log": {"level": "debug", "format": "json"}, "ingest": {"connect": ["ipc:///tmp/x"]}}"#
        )
        #expect(c.model.halfLifeHours == 3.5 && c.model.timeZone == "Europe/Berlin")
        #expect(c.log.level == .debug && c.log.format == .json)
        #expect(c.ingest.connect == [.init(endpoint: "ipc:///tmp/x")])
    }

    /// Every key of the file, set away from its default: each is read into
    /// its section and named by `changedKeys` (no key the loader takes is
    /// missing from the table, none is compared twice).
    @Test func everyKeyIsReadAndNamedWhenItChanges() throws {
        let c = try parse(
            #"""
            {"dataDirectory": "d2", "inboxDirectory": "i2", "inbox": {"sweepIntervalS": 2},
             "ingest": {"bind": ["ipc:///a"], "connect": ["ipc:///b"], "receiveHighWaterMark": 7},
             "updates": {"bind": ["ipc:///c"], "sendHighWaterMark": 8}, "query": {"bind": ["ipc:///d"]},
             "http": {"bind": "127.0.0.1:9", "tls": {"certificateFile": "c.pem", "keyFile": "k.pem"}, "maxConnections": 9,
                      "idleTimeoutS": 9, "trustedProxies": ["127.0.0.1", "::1"], "lockoutS": 9},
             "model": {"halfLifeHours": 4, "timeZone": "Asia/Kathmandu", "sleepThresholdMg": 30, "dailyLimitMg": 300},
             "publish": {"modelIntervalMs": 7, "refreshIntervalS": 8, "heartbeatIntervalS": 9},
             "store": {"tombstoneRetentionDays": 3, "backupDirectory": "b"},
             "limits": {"maxMgCaffeine": 9, "maxFutureSkewS": 9, "earliestDate": "2001-01-01T00:00:00Z",
                        "maxMessageBytes": 999, "maxFileBytes": 999, "maxExportBytes": 999},
             "log": {"level": "debug", "format": "json"},
             "security": {"allowPlaintextRemote": true, "curve": {"secretKeyFile": "s", "clientsDirectory": "k"},
                          "tokensDirectory": "t"},
             "follow": {"query": "ipc:///q", "updates": "ipc://u", "serverKey": "\#(String(repeating: "A", count: 40))",
                        "keyFile": "standby.key_secret"},
             "alerts": {"dailyLimit": false, "levelOverMg": 250, "sleepThreshold": false, "bedtime": "22:30", "maxAgeS": 60,
                        "retryInitialS": 2, "retryMaxS": 9, "pushSubject": "mailto:me@example.org", "webhook": {"url": "https://hooks.example/x", "secretFile": "w"},
                        "ntfy": {"url": "https://ntfy.sh/coffee", "tokenFile": "n"}},
             "mqtt": {"host": "broker", "port": 8883, "tls": {"caFile": "ca.pem"}, "username": "u", "passwordFile": "p",
                      "topicPrefix": "home/coffee", "discoveryPrefix": "ha", "keepaliveS": 60, "acceptDrinks": true}}
            """#)
        let defaults = try parse("{}")
        // store.postgresql cannot be set with follow (a standby is PostgreSQL's own): it is read on its own.
        let postgresql = try parse(#"{"store": {"postgresql": {"conninfo": "host=/run/pg dbname=coffee"}}}"#)
        #expect(postgresql.store.postgresql == "host=/run/pg dbname=coffee")
        #expect(postgresql.changedKeys(comparedTo: defaults) == ["store.postgresql.conninfo"])
        let changed = c.changedKeys(comparedTo: defaults) + ["store.postgresql.conninfo"]
        #expect(changed.count == ServiceConfiguration.keys.count)
        #expect(Set(changed).count == changed.count)
        #expect(c.ingest.receiveHighWaterMark == 7 && c.updates.sendHighWaterMark == 8 && c.limits.maxFileBytes == 999)
        #expect(c.settings.dailyLimitMg == 300 && c.settings.sleepThresholdMg == 30 && c.settings.model.halfLifeHours == 4)
        #expect(c.settings.bedtimeMinutes == 22 * 60 + 30 && c.settings.levelOverMg == 250)
        #expect(c.alerts.webhook?.secretFile == "/etc/ct/w" && c.mqtt?.caFile == "/etc/ct/ca.pem" && c.mqtt?.port == 8883)
        #expect(c.security.curve?.clientsDirectory == "/etc/ct/k" && c.security.tokensDirectory == "/etc/ct/t")
        #expect(c.http.tls == TLSFiles(certificateFile: "/etc/ct/c.pem", keyFile: "/etc/ct/k.pem"))
        #expect(c.http.trustedProxies == ["127.0.0.1", "::1"] && c.httpConfiguration?.maxConnections == 9)
        #expect(
            c.follow
                == .init(
                    query: "ipc:///q", updates: "ipc:///etc/ct/u", serverKey: String(repeating: "A", count: 40),
                    keyFile: "/etc/ct/standby.key_secret"))
        #expect(c.backupPath == "/etc/ct/b" && defaults.backupPath == defaults.dataDirectory + "/backups")
        #expect(defaults.changedKeys(comparedTo: defaults).isEmpty)
        var one = defaults
        one.publish.heartbeatIntervalS = 0.5
        #expect(one.changedKeys(comparedTo: defaults) == ["publish.heartbeatIntervalS"])
    }

    /// The defaults are the parts' own (each written once, in the part).
    @Test func sectionDefaultsAreThoseOfTheParts() {
        let c = ServiceConfiguration()
        #expect(c.limits.maxMessageBytes == IngestEndpoint.Configuration().maxMessageBytes)
        #expect(c.limits.maxMessageBytes == QueryEndpoint.Configuration().maxMessageBytes)
        #expect(c.ingest.receiveHighWaterMark == IngestEndpoint.Configuration().receiveHighWaterMark)
        #expect(c.publish.heartbeatIntervalS == 1 && c.publish.modelIntervalMs == 100 && c.publish.refreshIntervalS == 60)
        #expect(c.store.tombstoneRetentionDays == 30 && c.inbox.sweepIntervalS == 10)
        #expect(ServiceConfiguration.keys(of: "").isSuperset(of: ["dataDirectory", "ingest", "security"]))
        #expect(ServiceConfiguration.keys(of: "security") == ["curve", "allowPlaintextRemote", "tokensDirectory"])
        #expect(c.http.maxConnections == 1024 && c.http.tls == nil && c.security.tokensDirectory == nil)
    }

    @Test(arguments: [
        (#"{"colour": 1}"#, "unknown key \"colour\""),
        (#"{"log": {"colour": 1}}"#, "unknown key \"log.colour\""),
        (#"{"model": {"halfLifeHours": true}}"#, "model.halfLifeHours must be a number"),
        (#"{"model": {"halfLifeHours": 0}}"#, "model.halfLifeHours must be > 0"),
        (#"{"publish": {"modelIntervalMs": 1.5}}"#, "publish.modelIntervalMs must be a whole number"),
        (#"{"query": {"bind": "tcp://x:1"}}"#, "query.bind must be an array"),
        (#"{"query": {"bind": [5]}}"#, "query.bind[0] must be a string"),
        (#"{"model": {"timeZone": "Nowhere/Special"}}"#, "model.timeZone must be an IANA"),
        (#"{"log": {"format": "xml"}}"#, "log.format must be text or json"),
        (#"{"dataDirectory": 3}"#, "dataDirectory must be a string"),
        (#"[]"#, "must be a JSON object"),
        (#"{"log": {"level": "info", "level": "debug"}}"#, "log.level is given twice"),
        (#"{"store": {}, "store": {}}"#, "store is given twice"),
        (#"{"model": {"halfLifeHours": "5"}}"#, "model.halfLifeHours must be a number"),
        (#"{"follow": {"updates": "ipc:///u"}}"#, "follow.query is required with follow"),
        (#"{"follow": {"query": "127.0.0.1:5557", "updates": "ipc:///u"}}"#, "follow.query must be a ZeroMQ endpoint"),
        (#"{"follow": {"query": "ipc:///q", "updates": "ipc:///u", "keyFile": "k"}}"#, "follow.keyFile needs follow.serverKey"),
        (#"{"follow": {"query": "ipc:///q", "updates": "ipc:///u", "serverKey": "x"}}"#, "follow.serverKey must be a 40"),
        (#"{"follow": {"query": "ipc:///q", "updates": "ipc:///u", "primary": 1}}"#, "unknown key \"follow.primary\""),
    ])
    func errorsNameTheKey(json: String, expected: String) {
        let m = message(json)
        #expect(m.contains(expected), "\(m)")
        #expect(m.hasPrefix("c.json"))
    }

    /// The file is read by the service's own strict JSON reader, and a
    /// syntax error says where, as a person editing the file counts: line
    /// and column.
    /// A standby's connections to its primary are plaintext without
    /// follow.serverKey, whatever security.curve says of the service's own
    /// endpoints, and then, off loopback, refused as §6 refuses any.
    @Test func aStandbysFollowIsPlaintextWithoutTheServerKey() throws {
        let remote = #"{"query": "tcp://primary.example:5557", "updates": "tcp://primary.example:5556""#
        let curve = #""security": {"curve": {"secretKeyFile": "s", "clientsDirectory": "k"}}"#
        for (json, plaintext) in [
            (#"{"follow": \#(remote)}}"#, true), (#"{"follow": \#(remote)}, \#(curve)}"#, true),
            (#"{"follow": \#(remote), "serverKey": "\#(String(repeating: "A", count: 40))"}, \#(curve)}"#, false),
        ] {
            let c = try parse(json)
            let keys = SecuritySetup.plaintextEndpoints(c, curve: c.security.curve != nil).map(\.key)
            #expect(keys.contains("follow.query") == plaintext && keys.contains("follow.updates") == plaintext, "\(json)")
            #expect(keys.filter { $0.hasPrefix("follow.") }.count == (plaintext ? 2 : 0), "\(json)")
        }
    }

    @Test func syntaxErrorsGiveLineAndColumn() {
        let text = """
            {
              "log": {"level": "info",},
              "store": {}
            }
            """
        #expect(message(text) == "c.json:2:27: not valid JSON (expected a member name in quotes)")
        #expect(message("{\"a\": 1") == "c.json:1:8: not valid JSON (unterminated object)")
        #expect(message("") == "c.json:1:1: not valid JSON (unexpected end of input)")
        #expect(message("{} // defaults").hasPrefix("c.json:1:4: not valid JSON"))
    }

    @Test func logLineFormats() {
        let record = LogRecord(
            date: Date(timeIntervalSince1970: 0), level: .warning, label: "ingest", message: "rejected",
            metadata: ["topic": "drink.add", "reason": "mg must be > 0"])
        #expect(
            StderrLogHandler.render(record, format: .text)
                == #"1970-01-01T00:00:00.000Z warning ingest: rejected reason="mg must be > 0" topic=drink.add"#)
        let json = StderrLogHandler.render(record, format: .json)
        let object = try! JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: String]
        #expect(object["level"] == "warning" && object["topic"] == "drink.add" && object["message"] == "rejected")
    }
}
