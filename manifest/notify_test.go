package manifest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotifyConfig(t *testing.T) {
	head := "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource: {url: x}\nnotify:\n  mqtt:\n"
	t.Run("read", func(t *testing.T) {
		c, err := ParseConfig("agent.yaml", []byte(head+"    url: ssl://broker.example.com:8883\n    topic: tend/fleet/main\n"+
			"    usernameFile: /etc/tend/mqtt-user\n    passwordFile: /etc/tend/mqtt-password\n    caFile: /etc/tend/ca.pem\n"))
		require.NoError(t, err)
		c.SetDefaults("host")
		require.NoError(t, c.Validate())
		require.Equal(t, &MQTTNotify{URL: "ssl://broker.example.com:8883", Topic: "tend/fleet/main",
			UsernameFile: "/etc/tend/mqtt-user", PasswordFile: "/etc/tend/mqtt-password", CAFile: "/etc/tend/ca.pem"}, c.Notify.MQTT)
		require.True(t, MQTTUsesTLS(c.Notify.MQTT.URL))
	})
	tests := []struct{ name, mqtt, want string }{
		{"no url", "    topic: t\n", `agent.yaml:5: notify.mqtt.url: missing: the broker`},
		{"http url", "    url: http://broker:1883\n    topic: t\n", `agent.yaml:6: notify.mqtt.url: "http://broker:1883" is not a broker URL: use tcp://HOST:1883`},
		{"no host", "    url: tcp://\n    topic: t\n", `notify.mqtt.url: "tcp://" is not a broker URL`},
		{"credentials in the url", "    url: tcp://ci:s3cret@broker:1883\n    topic: t\n", `notify.mqtt.url: "tcp://ci:xxxxx@broker:1883" holds credentials: put them in usernameFile and passwordFile`},
		{"no topic", "    url: tcp://broker:1883\n", `notify.mqtt.topic: missing`},
		{"wildcard topic", "    url: tcp://broker:1883\n    topic: tend/#\n", `agent.yaml:7: notify.mqtt.topic: "tend/#" has a wildcard (+ or #): name one topic`},
		{"single-level wildcard", "    url: tcp://broker:1883\n    topic: tend/+/main\n", `has a wildcard`},
		{"relative password file", "    url: tcp://broker:1883\n    topic: t\n    usernameFile: /u\n    passwordFile: mqtt-password\n", `agent.yaml:9: notify.mqtt.passwordFile: "mqtt-password" must be an absolute path`},
		{"password without user", "    url: tcp://broker:1883\n    topic: t\n    passwordFile: /p\n", `notify.mqtt.usernameFile: missing: a password is set, and MQTT sends one only with a user name`},
		{"ca file without tls", "    url: tcp://broker:1883\n    topic: t\n    caFile: /ca.pem\n", `agent.yaml:8: notify.mqtt.caFile: is set but tcp:// is not TLS: use ssl:// or mqtts://`},
		{"unknown field", "    url: tcp://broker:1883\n    topic: t\n    qos: 2\n", `agent.yaml:8: notify.mqtt: unknown field "qos"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig("agent.yaml", []byte(head+tt.mqtt))
			if err == nil {
				c.SetDefaults("host")
				err = c.Validate()
			}
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}
