import CoffeeDomain
import Foundation

extension ConfigurationLoader {
    /// The `alerts` section (docs/protocol.md §16).
    static func alerts(_ s: Object, _ reader: Reader, _ folder: String) throws -> ServiceConfiguration.Alerts {
        var alerts = ServiceConfiguration.Alerts()
        if let v = try reader.bool(s, "alerts.dailyLimit") { alerts.dailyLimit = v }
        if let v = try reader.number(s, "alerts.levelOverMg", above: -1, max: 100_000) { alerts.levelOverMg = v > 0 ? v : nil }
        if let v = try reader.bool(s, "alerts.sleepThreshold") { alerts.sleepThreshold = v }
        if let v = try reader.string(s, "alerts.bedtime") {
            guard v == "off" || PersonSettings.minutes(v) != nil else {
                throw reader.fail("alerts.bedtime", "must be a local time HH:MM (23:00) or \"off\", got \"\(v)\"")
            }
            alerts.bedtime = v == "off" ? nil : v
        }
        if let v = try reader.number(s, "alerts.maxAgeS", above: 0) { alerts.maxAgeS = v }
        if let v = try reader.number(s, "alerts.retryInitialS", above: 0) { alerts.retryInitialS = v }
        if let v = try reader.number(s, "alerts.retryMaxS", above: 0) { alerts.retryMaxS = v }
        if let v = try reader.string(s, "alerts.pushSubject") {
            guard v.hasPrefix("mailto:") || v.hasPrefix("https://") else {
                throw reader.fail("alerts.pushSubject", "must be a mailto: or https:// URL (RFC 8292), got \"\(v.prefix(64))\"")
            }
            alerts.pushSubject = v
        }
        if let w = try reader.section(s, "alerts.webhook", allowed: ["url", "secretFile"]) {
            guard let url = try reader.string(w, "alerts.webhook.url") else {
                throw reader.fail("alerts.webhook.url", "is required with alerts.webhook")
            }
            try checkURL(url, "alerts.webhook.url", reader)
            guard let secret = try reader.string(w, "alerts.webhook.secretFile") else {
                throw reader.fail("alerts.webhook.secretFile", "is required with alerts.webhook (the file of the shared secret)")
            }
            alerts.webhook = .init(url: url, secretFile: resolve(secret, folder))
        }
        if let n = try reader.section(s, "alerts.ntfy", allowed: ["url", "tokenFile"]) {
            guard let url = try reader.string(n, "alerts.ntfy.url") else {
                throw reader.fail("alerts.ntfy.url", "is required with alerts.ntfy (https://ntfy.sh/TOPIC)")
            }
            try checkURL(url, "alerts.ntfy.url", reader)
            alerts.ntfy = .init(url: url, secretFile: try reader.string(n, "alerts.ntfy.tokenFile").map { resolve($0, folder) })
        }
        return alerts
    }

    /// The `mqtt` section (docs/protocol.md §16).
    static func mqtt(_ s: Object, _ reader: Reader, _ folder: String) throws -> ServiceConfiguration.MQTT {
        guard let host = try reader.string(s, "mqtt.host") else {
            throw reader.fail("mqtt.host", "is required with mqtt (the broker's host name or address)")
        }
        guard !host.contains("://"), !host.contains("/") else {
            throw reader.fail("mqtt.host", "must be a host name or address without a scheme, got \"\(host)\"")
        }
        var mqtt = ServiceConfiguration.MQTT(host: host)
        if let v = try reader.int(s, "mqtt.port", min: 1) {
            guard v <= 65_535 else { throw reader.fail("mqtt.port", "must be <= 65535, got \(v)") }
            mqtt.port = v
        }
        if let tls = try reader.section(s, "mqtt.tls", allowed: ["caFile"]) {
            guard let ca = try reader.string(tls, "mqtt.tls.caFile") else {
                throw reader.fail("mqtt.tls.caFile", "is required with mqtt.tls (the CA of the broker's certificate)")
            }
            mqtt.caFile = resolve(ca, folder)
        }
        mqtt.username = try reader.string(s, "mqtt.username")
        mqtt.passwordFile = try reader.string(s, "mqtt.passwordFile").map { resolve($0, folder) }
        for (key, path) in [("topicPrefix", \ServiceConfiguration.MQTT.topicPrefix), ("discoveryPrefix", \.discoveryPrefix)] {
            guard let v = try reader.string(s, "mqtt." + key) else { continue }
            guard !v.contains("+"), !v.contains("#"), !v.hasPrefix("/"), !v.hasSuffix("/"), !v.contains("//") else {
                throw reader.fail(
                    "mqtt." + key, "must be a topic without wildcards (+, #) or empty levels, got \"\(v)\"")
            }
            mqtt[keyPath: path] = v
        }
        if let v = try reader.int(s, "mqtt.keepaliveS", min: 5) { mqtt.keepaliveS = v }
        if let v = try reader.bool(s, "mqtt.acceptDrinks") { mqtt.acceptDrinks = v }
        return mqtt
    }

    private static func checkURL(_ url: String, _ key: String, _ reader: Reader) throws {
        guard let parsed = URLComponents(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "http" || scheme == "https", !(parsed.host ?? "").isEmpty
        else {
            throw reader.fail(key, "must be an http:// or https:// URL with a host, got \"\(url)\"")
        }
    }
}
