package notify

import (
	"context"
	"net/url"
	"sync"

	"github.com/tend-dev/tend/internal/feature"
	"github.com/tend-dev/tend/manifest"
)

// QoS is the quality of service of every publish and subscription: at
// least once.
const QoS = 1

// Transport is the MQTT client that Publish and a Subscriber go through.
// Package notify/mqtt registers it when imported (cmd/tend imports it
// unless built with tend_omit_mqtt, which leaves paho out).
type Transport interface {
	// Subscribe connects to cfg's broker as clientID with a clean
	// session, subscribes to cfg's topic with QoS, and calls onMessage
	// with the payload of every message on it, one at a time.
	Subscribe(ctx context.Context, cfg manifest.MQTTNotify, clientID string, onMessage func(payload []byte)) (Session, error)
	// Publish connects as clientID, sends payload to cfg's topic with
	// QoS, not retained, and returns once the broker acknowledged it.
	Publish(ctx context.Context, cfg manifest.MQTTNotify, clientID string, payload []byte) error
}

// Session is one connection with its subscription.
type Session interface {
	// Lost receives why the connection was lost.
	Lost() <-chan error
	// Close disconnects.
	Close()
}

var (
	transportMu sync.Mutex
	registered  Transport
)

// Register makes t the transport of Publish and Subscriber. It panics
// when one is registered already.
func Register(t Transport) {
	transportMu.Lock()
	defer transportMu.Unlock()
	if registered != nil {
		panic("notify: transport registered twice")
	}
	registered = t
}

// transport returns the registered transport, or the error of a tend
// built without MQTT: "this tend was built without mqtt (tag
// tend_omit_mqtt)".
func transport() (Transport, error) {
	transportMu.Lock()
	defer transportMu.Unlock()
	if registered == nil {
		return nil, feature.MQTT.Unregistered()
	}
	return registered, nil
}

// Redact drops the password of a URL, for messages and logs.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
