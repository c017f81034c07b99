package mqtt

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testmqtt"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
)

// subscription is a running notify.Subscriber whose messages and states a test
// waits for.
type subscription struct {
	*notify.Subscriber
	messages chan []byte
	states   chan notify.State
}

func subscribe(t *testing.T, cfg manifest.MQTTNotify) *subscription {
	t.Helper()
	s := &subscription{messages: make(chan []byte, 100), states: make(chan notify.State, 100)}
	s.Subscriber = &notify.Subscriber{Config: cfg, ClientID: "tend-" + t.Name(),
		Backoff:   func(int) time.Duration { return 20 * time.Millisecond },
		OnMessage: func(b []byte) { s.messages <- b },
		OnState:   func(st notify.State) { s.states <- st },
	}
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	return s
}

// waitState returns the first state that ok accepts.
func (s *subscription) waitState(t *testing.T, ok func(notify.State) bool) notify.State {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case st := <-s.states:
			if ok(st) {
				return st
			}
		case <-timeout:
			t.Fatal("the subscriber did not reach the state")
		}
	}
}

func (s *subscription) message(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-s.messages:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no message")
		return nil
	}
}

func connected(st notify.State) bool { return st.Connected }

func TestPublishReachesSubscriber(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}
	s := subscribe(t, cfg)
	s.waitState(t, connected)
	require.NoError(t, notify.Publish(context.Background(), cfg, notify.Payload{Revision: "main@sha1:abc"}))
	require.JSONEq(t, `{"revision": "main@sha1:abc"}`, string(s.message(t)))
}

// The broker killed and restarted: the subscriber says it is down and why,
// connects again, subscribes again (the session is clean), and hears the
// next message.
func TestSubscriberReconnectsAndResubscribes(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}
	s := subscribe(t, cfg)
	s.waitState(t, connected)
	b.Kill()
	down := s.waitState(t, func(st notify.State) bool { return !st.Connected && st.Err != nil })
	require.False(t, down.Since.IsZero())
	// Every failed attempt while it is down keeps the time it went down.
	again := s.waitState(t, func(st notify.State) bool { return !st.Connected })
	require.Equal(t, down.Since, again.Since)
	require.ErrorContains(t, again.Err, "cannot reach MQTT broker "+b.URL)
	b.Restart()
	s.waitState(t, connected)
	require.NoError(t, notify.Publish(context.Background(), cfg, notify.Payload{}))
	require.Equal(t, "{}", string(s.message(t)))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
	return f
}

func TestCredentials(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{Users: map[string]string{"ci": "right-password"}})
	good := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main", UsernameFile: writeFile(t, "ci\n"), PasswordFile: writeFile(t, "right-password\n")}
	t.Run("accepted", func(t *testing.T) {
		s := subscribe(t, good)
		s.waitState(t, connected)
		require.NoError(t, notify.Publish(context.Background(), good, notify.Payload{Revision: "abc"}))
		require.JSONEq(t, `{"revision": "abc"}`, string(s.message(t)))
	})
	bad := good
	bad.PasswordFile = writeFile(t, "wrong-password")
	t.Run("refused by publish", func(t *testing.T) {
		err := notify.Publish(context.Background(), bad, notify.Payload{})
		require.ErrorContains(t, err, "MQTT broker "+b.URL+" refused the connection (not Authorized) with the user name and password from "+bad.UsernameFile+" and "+bad.PasswordFile)
		require.NotContains(t, err.Error(), "wrong-password")
	})
	t.Run("refused to the subscriber", func(t *testing.T) {
		s := subscribe(t, bad)
		st := s.waitState(t, func(notify.State) bool { return true })
		require.False(t, st.Connected)
		require.ErrorContains(t, st.Err, "refused the connection")
	})
	t.Run("anonymous refused", func(t *testing.T) {
		err := notify.Publish(context.Background(), manifest.MQTTNotify{URL: b.URL, Topic: "t"}, notify.Payload{})
		require.ErrorContains(t, err, "refused the connection (not Authorized) with no user name")
	})
	t.Run("unreadable password file", func(t *testing.T) {
		missing := good
		missing.PasswordFile = filepath.Join(t.TempDir(), "missing")
		require.ErrorContains(t, notify.Publish(context.Background(), missing, notify.Payload{}), "read the MQTT password: open "+missing.PasswordFile)
	})
}

func TestTLS(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{TLS: true})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main", CAFile: b.CAFile}
	s := subscribe(t, cfg)
	s.waitState(t, connected)
	require.NoError(t, notify.Publish(context.Background(), cfg, notify.Payload{Revision: "abc"}))
	require.JSONEq(t, `{"revision": "abc"}`, string(s.message(t)))

	cfg.CAFile = ""
	require.ErrorContains(t, notify.Publish(context.Background(), cfg, notify.Payload{}), "TLS: tls: failed to verify certificate: x509: certificate signed by unknown authority; give the CA")
}

func TestPublishToNoBroker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	err = notify.Publish(context.Background(), manifest.MQTTNotify{URL: "tcp://" + addr, Topic: "t"}, notify.Payload{})
	require.ErrorContains(t, err, "cannot reach MQTT broker tcp://"+addr+": ")
	require.ErrorContains(t, err, "connection refused; check the URL and that the broker runs and listens there")
}

// A message far over MaxPayload (the broker takes up to 256 MB by
// default) is refused by its packet header, before it is read into
// memory: the subscriber drops the connection saying why, connects again
// and hears the next message; OnMessage never sees the large one.
func TestSubscriberRefusesOversizedPackets(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}
	s := subscribe(t, cfg)
	s.waitState(t, connected)

	// A raw publisher: tend notify only ever sends small payloads.
	opts, err := clientOptions(cfg, "tend-test-big")
	require.NoError(t, err)
	pub := paho.NewClient(opts)
	require.NoError(t, connect(context.Background(), pub, cfg))
	defer pub.Disconnect(0)
	tok := pub.Publish(cfg.Topic, 1, false, make([]byte, 4<<20))
	require.NoError(t, wait(context.Background(), tok))

	down := s.waitState(t, func(st notify.State) bool { return !st.Connected && st.Err != nil })
	require.ErrorContains(t, down.Err, "over 65536")
	s.waitState(t, connected)
	require.NoError(t, notify.Publish(context.Background(), cfg, notify.Payload{}))
	require.Equal(t, "{}", string(s.message(t)), "the large message never reached OnMessage")
}

// packetCap follows packets split anywhere across reads.
func TestPacketCapFollowsHeaders(t *testing.T) {
	// CONNACK (2 bytes), a PUBLISH of 200 bytes (two-byte length), PINGRESP.
	stream := append([]byte{0x20, 0x02, 0, 0, 0x30, 0xc8, 0x01}, make([]byte, 200)...)
	stream = append(stream, 0xd0, 0x00)
	for split := 1; split < len(stream); split++ {
		c := &packetCap{max: 256}
		require.NoError(t, c.follow(stream[:split]))
		require.NoError(t, c.follow(stream[split:]))
		require.Equal(t, inHeader, c.state, "split at %d", split)
	}
	c := &packetCap{max: 100}
	require.ErrorIs(t, c.follow(stream), ErrPacketTooLarge)
	c = &packetCap{max: 1 << 30}
	require.ErrorIs(t, c.follow([]byte{0x30, 0xff, 0xff, 0xff, 0xff}), ErrPacketTooLarge, "a fifth length byte")
}
