package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/tend-dev/tend/manifest"
)

// Publish sends p to cfg's topic with QoS 1 and returns once the broker
// acknowledged it (PUBACK), or why it could not: the broker unreachable,
// refusing the credentials, or ctx done. The message is not retained: an
// agent that was down polls on its schedule anyway.
func Publish(ctx context.Context, cfg manifest.MQTTNotify, p Payload) error {
	if errs := cfg.Check(""); len(errs) > 0 {
		return errs
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	opts, err := clientOptions(cfg, "tend-notify-"+hex.EncodeToString(id))
	if err != nil {
		return err
	}
	c := mqtt.NewClient(opts)
	if err := connect(ctx, c, cfg); err != nil {
		return err
	}
	defer c.Disconnect(250)
	if err := wait(ctx, c.Publish(cfg.Topic, QoS, false, p.Encode())); err != nil {
		return fmt.Errorf("publish to %s on MQTT broker %s: %w", cfg.Topic, redact(cfg.URL), err)
	}
	return nil
}
