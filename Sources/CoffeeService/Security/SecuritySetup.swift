import Foundation
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The security settings (docs/protocol.md §6) checked and loaded before
/// anything starts: the service's own key pair and the admitted clients
/// under CURVE, or the assurance that plaintext stays on this machine.
public struct SecuritySetup: Sendable {
    /// The service's own key pair; nil for plaintext.
    public var keys: CurveKeyPair?
    /// The admitted clients; nil for plaintext.
    public var registry: ClientRegistry?
    /// The HTTP endpoint's tokens (`security.tokensDirectory`); nil: no tokens.
    public var tokens: TokenRegistry?
    /// What start-up should say at warning (plaintext allowed across hosts).
    public var warnings: [String] = []

    /// A setting that stops start-up, saying what to do.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    public var isCurve: Bool { keys != nil }

    /// The endpoint's CURVE server settings, or nil for plaintext.
    public func server(_ domain: String) -> CurveServerSettings? {
        keys.map { CurveServerSettings(secretKey: $0.secretKey, domain: domain) }
    }

    /// Checks and loads `configuration`'s security.
    ///
    /// - Throws: `Refusal` for a plaintext TCP address that is not loopback
    ///   (unless allowed), a secret key that others can read or that cannot
    ///   be used, or a clients directory with a bad certificate.
    public static func prepare(_ configuration: ServiceConfiguration) throws -> SecuritySetup {
        var setup = SecuritySetup()
        if let curve = configuration.security.curve {
            let (secretFile, clients) = (curve.secretKeyFile, curve.clientsDirectory)
            guard ZMQContext.hasCurve else {
                throw Refusal(
                    description: "security.curve is set, but this libzmq (\(ZMQContext.version)) was built without CURVE")
            }
            setup.keys = try secretKey(secretFile)
            do {
                setup.registry = try ClientRegistry(directory: clients)
            } catch {
                throw Refusal(description: error.description)
            }
        }
        if let directory = configuration.security.tokensDirectory {
            do {
                setup.tokens = try TokenRegistry(directory: directory)
            } catch {
                throw Refusal(description: error.description)
            }
        }
        if let problem = httpProblems(configuration).first { throw Refusal(description: problem) }
        for (key, endpoint) in plaintextEndpoints(configuration, curve: setup.isCurve) where !isLoopback(endpoint) {
            if configuration.security.allowPlaintextRemote {
                setup.warnings.append(
                    "\(key) \(displayed(endpoint, key)) is not a loopback address and speaks plaintext: anyone who can reach it can read\(key == "http.bind" ? "" : " and change") this store (security.allowPlaintextRemote is true)"
                )
            } else {
                throw Refusal(description: refusal(key, endpoint))
            }
        }
        return setup
    }

    /// Every problem `prepare` would stop at, each checked on its own, for
    /// `coffee-tracker check`.
    public static func problems(_ configuration: ServiceConfiguration) -> [String] {
        var problems: [String] = []
        var plain = configuration
        plain.security.curve = nil
        if let settings = configuration.security.curve {
            do { _ = try secretKey(settings.secretKeyFile) } catch { problems.append("\(error)") }
            do { _ = try ClientRegistry(directory: settings.clientsDirectory) } catch { problems.append(error.description) }
        }
        if let directory = configuration.security.tokensDirectory {
            do { _ = try TokenRegistry(directory: directory) } catch { problems.append(error.description) }
        }
        problems += httpProblems(configuration)
        // Plaintext addresses, all of them (prepare stops at the first).
        if !configuration.security.allowPlaintextRemote {
            for (key, endpoint) in plaintextEndpoints(configuration, curve: configuration.security.curve != nil)
            where !isLoopback(endpoint) {
                problems.append(refusal(key, endpoint))
            }
        }
        return problems
    }

    /// The service's key pair from its secret certificate, which must be
    /// private (as ssh refuses a key others can read).
    ///
    /// - Parameter option: how the file was named, for the refusal
    ///   (`--secret-key-file` for the relay).
    public static func secretKey(_ path: String, option: String = "security.curve.secretKeyFile") throws -> CurveKeyPair {
        if let problem = PrivateKeyFile.problem(path, option: option) { throw Refusal(description: problem) }
        let certificate: CurveCertificate
        do {
            certificate = try CurveCertificate.load(path: path)
        } catch {
            throw Refusal(description: error.description)
        }
        guard let secret = certificate.secretKey, let pair = CurveKeyPair(secretKey: secret) else {
            throw Refusal(
                description:
                    "\(option) \(path) holds no secret-key: name the .key_secret file, not the public .key")
        }
        return pair
    }

    /// `http.tls` needs tokens (docs/protocol.md §12: TLS is for a door that
    /// faces other hosts, and such a door has tokens), and a certificate and
    /// key that can be used.
    static func httpProblems(_ configuration: ServiceConfiguration) -> [String] {
        guard let tls = configuration.http.tls, configuration.http.bind != nil else { return [] }
        var problems: [String] = []
        if configuration.security.tokensDirectory == nil {
            problems.append(
                "http.tls is set without security.tokensDirectory: an HTTPS endpoint faces other hosts, and needs tokens (coffee-tracker token NAME)"
            )
        }
        do { try tls.check() } catch { problems.append(error.description) }
        return problems
    }

    /// Whether a `tcp://host:port` endpoint is on loopback (127.0.0.0/8, ::1, localhost).
    /// Plaintext is for one machine: every TCP endpoint without CURVE (all
    /// of ZeroMQ's without security.curve, and connects and a standby's
    /// `follow` without a serverKey), and the HTTP endpoint always (it serves health data:
    /// the live page, the picture, the events and the metrics).
    static func plaintextEndpoints(_ configuration: ServiceConfiguration, curve: Bool) -> [(key: String, endpoint: String)] {
        var plaintext = configuration.ingest.connect.filter { !curve || $0.serverKey == nil }.map {
            (key: "ingest.connect", endpoint: $0.endpoint)
        }
        // A standby's connections to its primary are CURVE only with follow.serverKey.
        if let follow = configuration.follow, follow.serverKey == nil {
            plaintext += [(key: "follow.query", endpoint: follow.query), (key: "follow.updates", endpoint: follow.updates)]
        }
        if !curve {
            plaintext += configuration.tcpEndpoints.filter {
                !["ingest.connect", "follow.query", "follow.updates"].contains($0.key)
            }
        }
        if let http = configuration.http.bind, configuration.http.tls == nil {
            plaintext.append((key: "http.bind", endpoint: "tcp://" + http))
        }
        return plaintext.filter { $0.endpoint.hasPrefix("tcp://") }
    }

    static func refusal(_ key: String, _ endpoint: String) -> String {
        if key == "http.bind" {
            return
                "http.bind \(displayed(endpoint, key)) is not a loopback address, and the HTTP endpoint serves health data in plaintext, for one machine only. Set http.tls and security.tokensDirectory, bind it to 127.0.0.1 behind a TLS proxy, or set security.allowPlaintextRemote: true to accept plaintext across the network (with tokens: a TLS proxy on another host)"
        }
        return
            "\(key) \(endpoint) is not a loopback address, and without CURVE the service speaks plaintext, for one machine only. Set security.curve (docs/protocol.md §6), or security.allowPlaintextRemote: true to accept plaintext across the network"
    }

    /// `http.bind` is written `host:port` in the file, not as a ZeroMQ endpoint.
    private static func displayed(_ endpoint: String, _ key: String) -> String {
        key == "http.bind" ? String(endpoint.dropFirst("tcp://".count)) : endpoint
    }

    public static func isLoopback(_ endpoint: String) -> Bool {
        var rest = endpoint.dropFirst("tcp://".count)
        if let semicolon = rest.lastIndex(of: ";") { rest = rest[rest.index(after: semicolon)...] }  // source;destination
        guard let colon = rest.lastIndex(of: ":") else { return false }
        var host = rest[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return host == "localhost" || host == "::1" || host == "lo" || host.hasPrefix("127.")
    }
}
