import CoffeeService
import CoffeeTrackerClient
import Foundation
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A `coffee-tracker serve` started for a measurement, in a folder of its own,
/// with ipc:// endpoints inside it.
final class ServiceProcess {
    let folder: URL
    let process = Process()
    let binary: String
    var endpoints: [String: [String]] = [:]

    /// The harness's CURVE client settings when the service runs with
    /// `security.curve` (`curve: true`); nil for plaintext.
    private(set) var clientCurve: ClientCurve?

    init(binary: String, folder: URL, extra: String = "", curve: Bool = false) throws {
        self.binary = binary
        self.folder = folder
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let f = folder.path
        var security = ""
        if curve {
            // A server key and one admitted client (every role): the harness.
            let server = try CurveKeyPair.generate()
            let client = try CurveKeyPair.generate()
            let clients = folder.appendingPathComponent("clients")
            try FileManager.default.createDirectory(at: clients, withIntermediateDirectories: true)
            let secretPath = folder.appendingPathComponent("server.key_secret").path
            try Data(CurveCertificate(publicKey: server.publicKey, secretKey: server.secretKey).text(secret: true).utf8)
                .write(to: URL(fileURLWithPath: secretPath))
            try Syscall.call("chmod", secretPath) { chmod(secretPath, 0o600) }
            try Data(CurveCertificate(publicKey: client.publicKey, metadata: ["name": "bench"]).text(secret: false).utf8)
                .write(to: clients.appendingPathComponent("bench.key"))
            security = """
                , "security": {"curve": {"secretKeyFile": "server.key_secret", "clientsDirectory": "clients"}}
                """
            clientCurve = ClientCurve(serverKey: server.publicKey, keys: client)
        }
        let config = """
            {"dataDirectory": "data", "inboxDirectory": "inbox",
             "ingest": {"bind": ["ipc://\(f)/in"]}, "updates": {"bind": ["ipc://\(f)/up"]},
             "query": {"bind": ["ipc://\(f)/q"]}, "http": {"bind": "127.0.0.1:0"}, "model": {"timeZone": "UTC"},
             "log": {"level": "warning"}\(extra)\(security)}
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("config.json"))
    }

    var configPath: String { folder.appendingPathComponent("config.json").path }
    var data: URL { folder.appendingPathComponent("data") }
    var inbox: URL { folder.appendingPathComponent("inbox") }
    var pid: Int32 { process.processIdentifier }

    /// A query client of this service (CURVE when it runs with it).
    func client() throws -> BenchClient { try BenchClient(endpoint: endpoints["query"]![0], curve: clientCurve) }

    /// Starts it and returns the seconds from exec to the first `ping` reply.
    @discardableResult
    func start() throws -> Double {
        try? FileManager.default.removeItem(at: data.appendingPathComponent("endpoints.json"))
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--config", configPath]
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        let started = Date()
        try process.run()
        let client = try BenchClient(endpoint: "ipc://\(folder.path)/q", curve: clientCurve)
        while true {
            if (try? client.ping()) != nil { break }
            guard process.isRunning, Date().timeIntervalSince(started) < 60 else { throw BenchError("service did not start") }
        }
        let elapsed = Date().timeIntervalSince(started)
        endpoints = [
            "ingest": ["ipc://\(folder.path)/in"], "updates": ["ipc://\(folder.path)/up"], "query": ["ipc://\(folder.path)/q"],
        ]
        if let data = FileManager.default.contents(atPath: data.appendingPathComponent("endpoints.json").path),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let http = json["http"] as? String
        {
            endpoints["http"] = [http]
        }
        return elapsed
    }

    func stop() {
        guard process.isRunning else { return }
        _ = try? Syscall.call("kill") { kill(pid, SIGTERM) }  // ESRCH: it has exited already
        process.waitUntilExit()
    }

    /// CPU seconds (user + system) the service has used so far.
    var cpuSeconds: Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are 14 and 15.
        let utime = Double(fields[11]) ?? 0
        let stime = Double(fields[12]) ?? 0
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident and peak resident memory in MB.
    var memory: (rss: Double, peak: Double) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Double {
            for line in text.split(separator: "\n") where line.hasPrefix(name) {
                return Double(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
            }
            return 0
        }
        return (field("VmRSS:") / 1024, field("VmHWM:") / 1024)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
