import CoffeeDomain
import Foundation
import HealthStore

extension QueryHandler {
    /// `POST /api/v1/health-auto-export` (docs/protocol.md §12): the app's
    /// body made into drinks (`HealthAutoExport`) and stored in one commit,
    /// answered after it is durable. Data that break a rule are skipped and
    /// named; other metrics and workouts are counted and ignored.
    public func importHealthAutoExport(_ body: [UInt8], caller: Caller) async -> Outcome {
        await outcome { try await healthAutoExport(body, caller: caller) }
    }

    private func healthAutoExport(_ body: [UInt8], caller: Caller) async throws -> JSONValue {
        if let following {
            throw QueryError(.readOnly, "this service is a standby of \(following.primary): send the export to the primary")
        }
        guard body.count <= maxMessageBytes else {
            throw QueryError(
                .tooLarge,
                "the export is \(body.count) bytes; limits.maxMessageBytes is \(maxMessageBytes): export the caffeine metric alone"
            )
        }
        let export: HealthAutoExport
        do {
            export = try body.withUnsafeBytes { try HealthAutoExport.read($0) }
        } catch let error as JSONReader.SyntaxError {
            throw QueryError(.badRequest, "the body is not valid JSON (\(error))")
        } catch {
            throw QueryError(.badRequest, "\(error)")
        }
        let found = export.drinks(validator: validator, now: clock.now())
        counters.received(found.drinks.count + found.skipped.count, over: caller.channel)
        var anchor = await store.anchor
        var added = 0
        var duplicates = 0
        if !found.drinks.isEmpty {
            let result = try await store.apply(WriteBatch(drinks: found.drinks))
            count(result)
            (anchor, added, duplicates) = (result.anchor, result.added, result.duplicates)
        }
        return .object([
            ("ok", true), ("anchor", .int(anchor)), ("added", .int(Int64(added))), ("duplicates", .int(Int64(duplicates))),
            ("ignoredMetrics", .int(Int64(found.ignoredMetrics))), ("ignoredWorkouts", .int(Int64(found.ignoredWorkouts))),
            (
                "skipped",
                .array(
                    found.skipped.map {
                        .object([
                            ("index", .int(Int64($0.index))), ("field", .string($0.field)), ("message", .string($0.message)),
                        ])
                    })
            ),
        ])
    }
}
