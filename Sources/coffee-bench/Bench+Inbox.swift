import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore
import Synchronization
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

extension Bench {
    // MARK: 3. Inbox import

    struct Import {
        var drinksPerSecond: Double
        var peakMB: Double
        var decodePerSecond: Double
    }

    func inboxImport(name: String, drinks: Int) throws -> Import {
        sync()  // as in live(): no earlier write-back in this measurement
        let s = try ServiceProcess(binary: binary, folder: folder("inbox"))
        try s.start()
        defer {
            s.stop()
            try? FileManager.default.removeItem(at: s.folder)
        }
        let file = s.folder.appendingPathComponent(name)
        let date = Date().addingTimeInterval(-40 * 3600)  // outside the model's window, as history is
        let uuids = (0..<drinks).map { _ in UUID() }
        let format = (name as NSString).pathExtension
        switch format {
        case "jsonl":
            var text = ""
            text.reserveCapacity(drinks * 100)
            for u in uuids { text += #"{"uuid":"\#(u.uuidString)","mgCaffeine":95.5,"date":"\#(RFC3339.string(date))"}"# + "\n" }
            try Data(text.utf8).write(to: file)
        case "json":
            let items = uuids.map { #"{"uuid":"\#($0.uuidString)","mgCaffeine":95.5,"date":"\#(RFC3339.string(date))"}"# }
            try Data(("[" + items.joined(separator: ",") + "]").utf8).write(to: file)
        case "plist":
            struct SampleDrink: Codable {
                var mgCaffeine: Double
                var date: Date
                var uuid: UUID
            }
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            try encoder.encode(uuids.map { SampleDrink(mgCaffeine: 95.5, date: date, uuid: $0) }).write(to: file)
        default: throw BenchError("this section makes JSON, JSON Lines and property lists only")
        }
        // Baseline: Foundation's decoder over the same file, in this process.
        let data = try Data(contentsOf: file)
        let d0 = now()
        switch format {
        case "jsonl":
            let decoder = JSONDecoder()
            var start = data.startIndex
            while start < data.endIndex {
                let end = data[start...].firstIndex(of: 10) ?? data.endIndex
                if end > start { _ = try decoder.decode(DrinkInput.self, from: data[start..<end]) }
                start = end + 1
            }
        case "json": _ = try JSONDecoder().decode([DrinkInput].self, from: data)
        case "plist": _ = try PropertyListDecoder().decode([DrinkInput].self, from: data)
        default: throw BenchError("this section makes JSON, JSON Lines and property lists only")
        }
        let decodeRate = Double(drinks) / (now() - d0)
        let target = s.inbox.appendingPathComponent("processed").appendingPathComponent(name)
        let t0 = now()
        let destination = s.inbox.appendingPathComponent(name).path
        try Syscall.call("rename", "\(file.path) to \(destination)") { rename(file.path, destination) }
        while !FileManager.default.fileExists(atPath: target.path) {
            usleep(20_000)
            guard now() - t0 < 600 else { throw BenchError("import of \(name) did not finish") }
        }
        return Import(drinksPerSecond: Double(drinks) / (now() - t0), peakMB: s.memory.peak, decodePerSecond: decodeRate)
    }
}
