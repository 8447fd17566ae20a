import CoffeeService
import Foundation

/// `check`: the configuration and its key files, checked as `serve` would
/// check them, with nothing started.
enum CheckCommand {
    static let help = """
        Usage: coffee-tracker check [--config FILE]

        Reads the configuration (default config/coffee-tracker.json when it
        exists, else the embedded defaults) and the files it names, as serve
        would, without starting anything: the JSON and every key; the
        security: plaintext addresses beyond loopback, the secret certificate
        (readable by others, or not a secret key), the clients directory's
        certificates; and whether the data and inbox folders can be made.
        Prints every problem found and exits 1, or "ok" and exits 0.
        """

    static func run(_ words: [String]) throws -> Int32 {
        guard let args = try Arguments.configOnly(words, help: help) else { return 0 }
        let path = configurationPath(args["config"])
        let name = path ?? "the embedded defaults"
        let configuration: ServiceConfiguration
        do {
            configuration = try loadConfiguration(path)
        } catch {
            print("problem: \(error)")
            return 1
        }
        let problems = SecuritySetup.problems(configuration) + folderProblems(configuration)
        guard problems.isEmpty else {
            for problem in problems { print("problem: \(problem)") }
            print("\(problems.count) problem\(problems.count == 1 ? "" : "s") in \(name)")
            return 1
        }
        print("ok: \(name)")
        return 0
    }

    /// Folders the service would create or write: each must exist and be
    /// writable, or be creatable under a writable parent.
    static func folderProblems(_ c: ServiceConfiguration) -> [String] {
        [("dataDirectory", c.dataDirectory), ("inboxDirectory", c.inboxDirectory)].compactMap { key, folder in
            var probe = folder
            while !FileManager.default.fileExists(atPath: probe) {
                let parent = (probe as NSString).deletingLastPathComponent
                if parent == probe || parent.isEmpty { break }
                probe = parent
            }
            return FileManager.default.isWritableFile(atPath: probe)
                ? nil : "\(key) \(folder): \(probe) is not writable by this user"
        }
    }
}
