import CoffeeDomain
import CoffeeModel
import Foundation
import HealthStore
import ZeroMQ

/// Each part's own `Configuration`, read from the file's sections: the one
/// place a key of the file reaches the part that uses it, so that the
/// composition root (`CoffeeTrackerService.makeParts`) only composes.
/// What the file does not say keeps the part's own default.
extension ServiceConfiguration {
    func storeConfiguration(clock: any WallClock) -> HealthStore.Configuration {
        var part = HealthStore.Configuration(
            path: storePath, tombstoneRetention: store.tombstoneRetentionDays * 86_400, clock: clock)
        part.purgesTombstones = follow == nil  // a standby follows its primary's purge
        part.standby = follow != nil  // and a later start without `follow` promotes it
        part.postgresql = store.postgresql
        part.settingsDefaults = settings
        return part
    }

    func broadcasterConfiguration(curve: CurveServerSettings?) -> Broadcaster.Configuration {
        var part = Broadcaster.Configuration()
        part.bind = updates.bind
        part.sendHighWaterMark = updates.sendHighWaterMark
        part.heartbeatInterval = .milliseconds(Int64(publish.heartbeatIntervalS * 1000))
        part.curve = curve
        return part
    }

    var modelServiceConfiguration: ModelService.Configuration {
        ModelService.Configuration(
            roundInterval: .milliseconds(publish.modelIntervalMs),
            refreshInterval: .milliseconds(Int64(publish.refreshIntervalS * 1000)))
    }

    func queryConfiguration(curve: CurveServerSettings?) -> QueryEndpoint.Configuration {
        var part = QueryEndpoint.Configuration()
        part.bind = query.bind
        part.maxMessageBytes = limits.maxMessageBytes
        part.curve = curve
        return part
    }

    func ingestConfiguration(curve: CurveServerSettings?, keys: CurveKeyPair?) -> IngestEndpoint.Configuration {
        var part = IngestEndpoint.Configuration()
        part.bind = ingest.bind
        part.connect = ingest.connect
        part.receiveHighWaterMark = ingest.receiveHighWaterMark
        part.maxMessageBytes = limits.maxMessageBytes
        part.curve = curve
        part.clientKeys = keys
        return part
    }

    var importerConfiguration: InboxImporter.Configuration {
        var part = InboxImporter.Configuration(inbox: URL(fileURLWithPath: inboxDirectory))
        part.maxFileBytes = limits.maxFileBytes
        part.maxExportBytes = limits.maxExportBytes
        part.attemptRecord = (dataDirectory as NSString).appendingPathComponent("importing.json")
        return part
    }

    var inboxSweepInterval: Duration { .milliseconds(Int64(inbox.sweepIntervalS * 1000)) }

    /// Nil when `http.bind` turns the endpoint off.
    var httpConfiguration: HTTPEndpoint.Configuration? {
        http.bind.map { address in
            var part = HTTPEndpoint.Configuration()
            part.bind = address
            part.tls = http.tls
            part.maxConnections = http.maxConnections
            part.idleTimeout = .milliseconds(Int64(http.idleTimeoutS * 1000))
            part.maxBodyBytes = limits.maxMessageBytes
            return part
        }
    }
}
