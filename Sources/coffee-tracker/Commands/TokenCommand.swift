import CoffeeService
import Foundation

enum TokenCommand {
    static let help = """
        Usage: coffee-tracker token NAME [--roles ROLES] [--link BASE_URL] [--config FILE]

        Makes a token for the HTTP endpoint (docs/protocol.md §12): 256 random
        bits, printed once as ct_ and 43 characters. Only its SHA-256 and its
        roles are kept, in NAME.token (mode 0600) in security.tokensDirectory;
        the service reads that folder at start and on SIGHUP. To revoke a
        token, remove its file and send SIGHUP (its browser logins end too).

        A phone, a widget or curl sends it as "Authorization: Bearer TOKEN". A
        browser opens BASE_URL/login?token=TOKEN once (--link prints that link):
        it keeps a cookie, and the page and its live events work from then on.

        Options:
          --roles ROLES   comma-separated: read (the model, changes, stats, the
                          page), write (adds, deletions, the drinks catalogue),
                          admin (the person's settings: half-life, sleep
                          threshold, daily limit, time zone), metrics
                          (/metrics); default: read
          --link URL      also print the browser's login link for the service
                          at URL (https://coffee.example.org)
          --config FILE   the service's configuration (default:
                          config/coffee-tracker.json, else the embedded defaults)
          -h, --help      show this help
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: ["roles", "link", "config"], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.positional.count == 1, let name = args.positional.first else {
            throw Arguments.UsageError(description: "token needs one NAME (alice-phone), the token file's name")
        }
        var roles: Set<TokenRole> = []
        for word in (args["roles"] ?? "read").split(separator: ",") {
            guard let role = TokenRole(rawValue: String(word)) else {
                throw Arguments.UsageError(
                    description:
                        "--roles: unknown role \"\(word)\"; the roles are \(TokenRole.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            roles.insert(role)
        }
        let configuration = try loadConfiguration(configurationPath(args["config"]))
        guard let directory = configuration.security.tokensDirectory else {
            printError(
                "coffee-tracker token: security.tokensDirectory is not set in \(configurationPath(args["config"]) ?? "the embedded defaults"); set it (\"security\": {\"tokensDirectory\": \"tokens\"}) so that the service reads the token"
            )
            return 1
        }
        let token = TokenRegistry.newToken()
        do {
            try TokenRegistry.write(token: token, name: name, roles: roles, into: directory)
        } catch {
            printError("coffee-tracker token: \(error)")
            return 1
        }
        print(token)
        if let base = args["link"] {
            let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
            print("\(trimmed)/login?token=\(token)")
        }
        printError(
            "wrote \((directory as NSString).appendingPathComponent(name + ".token")) (roles \(roles.sorted().map(\.rawValue).joined(separator: ","))); the token is shown once: send SIGHUP to a running service"
        )
        return 0
    }
}
