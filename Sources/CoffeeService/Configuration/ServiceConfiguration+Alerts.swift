import CoffeeAlerts
import CoffeeDomain
import Foundation

extension ServiceConfiguration {
    /// `alerts` (docs/protocol.md §16): the rules and where alerts go.
    public struct Alerts: Sendable, Equatable {
        public var dailyLimit = true
        /// Nil: off (`alerts.levelOverMg`: 0).
        public var levelOverMg: Double? = PersonSettings.defaultLevelOverMg
        public var sleepThreshold = true
        /// `HH:MM` in the person's zone; nil: off (`alerts.bedtime`: "off").
        public var bedtime: String? = PersonSettings.defaultBedtime
        public var maxAgeS = OutboxDeliverer.Configuration().maxAge
        public var retryInitialS = OutboxDeliverer.Configuration().retryInitial
        public var retryMaxS = OutboxDeliverer.Configuration().retryMax
        /// Who a push service tells of a problem with this service's pushes (the VAPID token's `sub`, §17).
        public var pushSubject = "mailto:coffee-tracker@localhost"
        /// `alerts.webhook`: a URL and the file of the shared secret that signs each body.
        public var webhook: Endpoint?
        /// `alerts.ntfy`: a topic's URL and the file of an access token (optional).
        public var ntfy: Endpoint?

        /// A receiver: its URL and the file of its secret or token.
        public struct Endpoint: Sendable, Equatable {
            public var url: String
            public var secretFile: String?
        }

        /// The rules that are on, as `AlertRules` takes them (the level and the
        /// bedtime are defaults of the person's settings, `ServiceConfiguration.settings`).
        public var rules: AlertRules.Configuration {
            var rules = AlertRules.Configuration()
            rules.dailyLimit = dailyLimit
            rules.sleepThreshold = sleepThreshold
            return rules
        }
    }

    /// `mqtt` (docs/protocol.md §16): the broker the states go to.
    public struct MQTT: Sendable, Equatable {
        public var host: String
        public var port = MQTTPublisher.Configuration.defaultPort
        /// `mqtt.tls.caFile`: TLS, with the CA that signed the broker's certificate.
        public var caFile: String?
        public var username: String?
        public var passwordFile: String?
        /// Topics are `<topicPrefix>/<store id>/…`.
        public var topicPrefix = "coffee-tracker"
        /// Home Assistant's discovery prefix.
        public var discoveryPrefix = "homeassistant"
        public var keepaliveS = MQTTPublisher.Configuration.defaultKeepalive
        /// Take drinks from the command topics `<topicPrefix>/<node>/drink.add` and `…/drink.delete`.
        public var acceptDrinks = false
    }
}
