package mqtt

import (
	"context"
	"fmt"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
)

func init() { notify.Register(transport{}) }

// transport is notify's Transport over paho.
type transport struct{}

var _ notify.Transport = transport{}

// Publish sends payload to cfg's topic and waits for the broker's PUBACK.
func (transport) Publish(ctx context.Context, cfg manifest.MQTTNotify, clientID string, payload []byte) error {
	opts, err := clientOptions(cfg, clientID)
	if err != nil {
		return err
	}
	c := paho.NewClient(opts)
	if err := connect(ctx, c, cfg); err != nil {
		return err
	}
	defer c.Disconnect(250)
	if err := wait(ctx, c.Publish(cfg.Topic, notify.QoS, false, payload)); err != nil {
		return fmt.Errorf("publish to %s on MQTT broker %s: %w", cfg.Topic, notify.Redact(cfg.URL), err)
	}
	return nil
}

// session is a connection with its subscription.
type session struct {
	c    paho.Client
	lost chan error
}

func (s *session) Lost() <-chan error { return s.lost }
func (s *session) Close()             { s.c.Disconnect(250) }

// Subscribe connects and subscribes; the session's Lost receives when the
// connection is lost.
func (transport) Subscribe(ctx context.Context, cfg manifest.MQTTNotify, clientID string, onMessage func([]byte)) (notify.Session, error) {
	opts, err := clientOptions(cfg, clientID)
	if err != nil {
		return nil, err
	}
	lost := make(chan error, 1)
	opts.SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
	c := paho.NewClient(opts)
	if err := connect(ctx, c, cfg); err != nil {
		return nil, err
	}
	tok := c.Subscribe(cfg.Topic, notify.QoS, func(_ paho.Client, m paho.Message) { onMessage(m.Payload()) })
	err = wait(ctx, tok)
	if err == nil {
		if qos, ok := tok.(*paho.SubscribeToken).Result()[cfg.Topic]; ok && qos > 2 {
			err = fmt.Errorf("MQTT broker %s refused the subscription to %s: allow this client (its user name) to read the topic in the broker's ACL", notify.Redact(cfg.URL), cfg.Topic)
		}
	} else {
		err = fmt.Errorf("subscribe to %s on MQTT broker %s: %w", cfg.Topic, notify.Redact(cfg.URL), err)
	}
	if err != nil {
		c.Disconnect(0)
		return nil, err
	}
	return &session{c: c, lost: lost}, nil
}
