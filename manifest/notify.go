package manifest

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tend-dev/tend/internal/feature"
)

// Notify says how the agent hears that the fleet changed, so it ticks
// before its schedule says to. Polling on the schedule stays the floor.
type Notify struct {
	// MQTT subscribes to a topic of an MQTT 3.1.1 broker: any message on
	// it asks for a tick now.
	MQTT *MQTTNotify `json:"mqtt,omitempty"`
}

// MQTTNotify is an MQTT broker and topic. Credentials are read from
// files, never written in the config.
type MQTTNotify struct {
	// URL is the broker: tcp://HOST:1883 (or mqtt://), ssl://HOST:8883 (or
	// mqtts://, tls://) over TLS, ws:// or wss:// over WebSocket.
	URL string `json:"url" jsonschema:"required"`
	// Topic is one topic name, without the wildcards + and #.
	Topic        string `json:"topic" jsonschema:"required"`
	UsernameFile string `json:"usernameFile,omitempty"`
	PasswordFile string `json:"passwordFile,omitempty"`
	// CAFile is a PEM bundle of the certificate authorities that sign the
	// broker's certificate (TLS schemes only); default the system's.
	CAFile string `json:"caFile,omitempty"`
}

// MQTT URL schemes, plain and over TLS, as tend accepts them.
var (
	mqttPlainSchemes = []string{"tcp", "mqtt", "ws"}
	mqttTLSSchemes   = []string{"ssl", "tls", "mqtts", "wss"}
)

// MQTTUsesTLS reports whether the broker URL's scheme is one over TLS.
func MQTTUsesTLS(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && slices.Contains(mqttTLSSchemes, u.Scheme)
}

// Check returns what is wrong with the broker's settings, by the field
// under prefix ("notify.mqtt" in agent.yaml, or the flags of tend notify
// with prefix ""), with what to do.
func (m *MQTTNotify) Check(prefix string) Errors {
	var errs Errors
	field := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	if err := feature.MQTT.Check(); err != nil {
		errs.add("", 0, prefix, "%v", err)
	}
	u, err := url.Parse(m.URL)
	switch {
	case m.URL == "":
		errs.add("", 0, field("url"), "missing: the broker, e.g. tcp://broker.example.com:1883 or ssl://broker.example.com:8883")
	case err != nil || u.Host == "" || !(slices.Contains(mqttPlainSchemes, u.Scheme) || slices.Contains(mqttTLSSchemes, u.Scheme)):
		errs.add("", 0, field("url"), "%q is not a broker URL: use tcp://HOST:1883, ssl://HOST:8883 (or mqtts://) for TLS, or ws(s)://HOST/PATH", redactURL(m.URL))
	case u.User != nil:
		errs.add("", 0, field("url"), "%q holds credentials: put them in usernameFile and passwordFile", redactURL(m.URL))
	}
	switch {
	case m.Topic == "":
		errs.add("", 0, field("topic"), "missing: the topic CI publishes to after a merge, e.g. tend/fleet/main")
	case strings.ContainsAny(m.Topic, "+#\x00"):
		errs.add("", 0, field("topic"), "%q has a wildcard (+ or #): name one topic, e.g. tend/fleet/main", m.Topic)
	case len(m.Topic) > 65535:
		errs.add("", 0, field("topic"), "is %d bytes long: MQTT allows at most 65535", len(m.Topic))
	}
	for _, f := range []struct{ name, path string }{{"usernameFile", m.UsernameFile}, {"passwordFile", m.PasswordFile}, {"caFile", m.CAFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			errs.add("", 0, field(f.name), "%q must be an absolute path", f.path)
		}
	}
	if m.PasswordFile != "" && m.UsernameFile == "" {
		errs.add("", 0, field("usernameFile"), "missing: a password is set, and MQTT sends one only with a user name")
	}
	if m.CAFile != "" && err == nil && slices.Contains(mqttPlainSchemes, u.Scheme) {
		errs.add("", 0, field("caFile"), "is set but %s:// is not TLS: use ssl:// or mqtts:// (wss:// for WebSocket)", u.Scheme)
	}
	return errs
}

// redactURL drops the password of a URL, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
