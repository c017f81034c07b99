package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/tend-dev/tend/manifest"
)

// Publish sends p to cfg's topic with QoS 1 and returns once the broker
// acknowledged it (PUBACK), or why it could not: the broker unreachable,
// refusing the credentials, ctx done, or a tend built without MQTT. The
// message is not retained: an agent that was down polls on its schedule
// anyway.
func Publish(ctx context.Context, cfg manifest.MQTTNotify, p Payload) error {
	if errs := cfg.Check(""); len(errs) > 0 {
		return errs
	}
	t, err := transport()
	if err != nil {
		return err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	return t.Publish(ctx, cfg, "tend-notify-"+hex.EncodeToString(id), p.Encode())
}
