import CoffeeService
import Foundation
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

enum KeygenCommand {
    static let help = """
        Usage: coffee-tracker keygen NAME [--name CLIENT] [--roles ROLES]

        Makes a CURVE key pair (docs/protocol.md §6) and writes it as ZeroMQ
        certificates, the files CZMQ's zcert and pyzmq's zmq.auth write:

          NAME.key          the public certificate: give it to the other side
                            (a client's goes into the service's clients
                            directory, security.curve.clientsDirectory)
          NAME.key_secret   the secret certificate, mode 0600: it stays with
                            its owner (the service's is security.curve.secretKeyFile;
                            a client passes its own as --key)

        NAME may be a path (keys/server). Existing files are never overwritten.
        Prints the public key.

        Options:
          --name CLIENT   the name in the certificate's metadata (default: the
                          file name); drinks from this client get the source
                          "bus:CLIENT" or "query:CLIENT"
          --roles ROLES   comma-separated roles for a client certificate:
                          publish, subscribe, read, write, admin (default: all
                          five; admin changes the person's settings)
          -h, --help      show this help
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: ["name", "roles"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.positional.count == 1, let base = args.positional.first else {
            throw Arguments.UsageError(
                description: "keygen needs one NAME, the path of the files to write (NAME.key, NAME.key_secret)")
        }
        guard ZMQContext.hasCurve else {
            printError("coffee-tracker keygen: this libzmq (\(ZMQContext.version)) was built without CURVE")
            return 1
        }
        var metadata = ["name": args["name"] ?? (base as NSString).lastPathComponent]
        if let roles = args["roles"] {
            let known = Role.allCases.map(\.rawValue)
            for role in roles.split(separator: ",") where !known.contains(String(role)) {
                throw Arguments.UsageError(
                    description: "--roles: unknown role \"\(role)\"; the roles are \(known.joined(separator: ", "))")
            }
            metadata["roles"] = roles
        }
        let pair = try CurveKeyPair.generate()
        let certificate = CurveCertificate(publicKey: pair.publicKey, secretKey: pair.secretKey, metadata: metadata)
        do {
            try write(certificate.text(secret: true), to: base + ".key_secret", mode: 0o600)
            try write(certificate.text(secret: false), to: base + ".key", mode: 0o644)
        } catch {
            printError("coffee-tracker keygen: \(error)")
            return 1
        }
        print(pair.publicKey)
        return 0
    }

    /// Creates `path` with `mode` (never replacing a file), writes and syncs it.
    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        do {
            try DurableFile.create(text, at: path, mode: mode)
        } catch {
            if error.errno == EEXIST { throw KeygenError(description: "\(path) exists already; keygen never overwrites a key") }
            throw error
        }
    }
}

struct KeygenError: Error, CustomStringConvertible {
    let description: String
}
