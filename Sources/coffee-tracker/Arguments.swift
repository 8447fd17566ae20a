/// Command-line words: flags with values, switches, and positional words.
struct Arguments {
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    private(set) var options: [String: String] = [:]
    /// Every value of each flag, in order, for flags that may repeat (`--bind A --bind B`).
    private(set) var repeated: [String: [String]] = [:]
    private(set) var switches: Set<String> = []
    private(set) var positional: [String] = []

    /// Parses `words` given which flags take a value and which are switches.
    init(_ words: [String], valued: Set<String>, switches known: Set<String>) throws {
        var i = 0
        while i < words.count {
            let w = words[i]
            if w == "--" {
                positional += words[(i + 1)...]
                break
            }
            if w.hasPrefix("--") {
                var name = String(w.dropFirst(2))
                var value: String?
                if let eq = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if valued.contains(name) {
                    if value == nil {
                        i += 1
                        guard i < words.count else { throw UsageError(description: "--\(name) needs a value") }
                        value = words[i]
                    }
                    options[name] = value
                    repeated[name, default: []].append(value ?? "")
                } else if known.contains(name) {
                    switches.insert(name)
                } else {
                    throw UsageError(description: "unknown option --\(name)")
                }
            } else if w == "-h" {
                switches.insert("help")
            } else {
                positional.append(w)
            }
            i += 1
        }
    }

    subscript(_ name: String) -> String? { options[name] }
    /// Every value given for `name`, in order.
    func all(_ name: String) -> [String] { repeated[name] ?? [] }
    func has(_ name: String) -> Bool { switches.contains(name) }

    /// The words of a command that takes only `--config`: nil when `--help`
    /// was asked for (and printed).
    static func configOnly(_ words: [String], help: String) throws -> Arguments? {
        let args = try Arguments(words, valued: ["config"], switches: ["help"])
        if args.has("help") {
            print(help)
            return nil
        }
        guard args.positional.isEmpty else {
            throw UsageError(description: "unexpected argument \"\(args.positional[0])\"")
        }
        return args
    }
}
