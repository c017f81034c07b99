package notify

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/manifest"
)

// DefaultBackoff is the wait before the n-th reconnection in a row: 1s,
// doubling up to a minute, plus up to half as much at random so a fleet
// does not reconnect to a restarted broker at once.
func DefaultBackoff(n int) time.Duration {
	d := backoff.Exponential{Initial: time.Second, Max: time.Minute}.Delay(n)
	return d + rand.N(d/2+1)
}

// State is the subscription's state, as the agent's status shows it.
type State struct {
	Connected bool
	// Since is when it connected, or when it lost (or first failed to
	// make) the connection.
	Since time.Time
	// Err is why it is not connected: the last attempt's error.
	Err error
}

// Log keys.
const (
	keyBroker = "broker"
	keyTopic  = "topic"
	keyError  = "error"
	keyRetry  = "retryIn"
)

// Subscriber keeps a subscription to one topic: it connects with a clean
// session, subscribes with QoS 1, and when the connection fails or is lost
// connects and subscribes again after Backoff. Start, then Stop.
type Subscriber struct {
	Config   manifest.MQTTNotify
	ClientID string
	Logger   *slog.Logger
	// Backoff is the wait before the n-th reconnection in a row; nil
	// means DefaultBackoff.
	Backoff func(n int) time.Duration
	// OnMessage is called with the payload of every message on the topic,
	// one at a time.
	OnMessage func(payload []byte)
	// OnState, if set, is called at every change of state, and after
	// every failed attempt.
	OnState func(State)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start connects in the background and keeps the subscription up until
// Stop or ctx's end.
func (s *Subscriber) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(ctx)
	}()
}

// Stop disconnects and waits for the subscriber to end.
func (s *Subscriber) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

func (s *Subscriber) run(ctx context.Context) {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With(keyBroker, Redact(s.Config.URL), keyTopic, s.Config.Topic)
	delay := s.Backoff
	if delay == nil {
		delay = DefaultBackoff
	}
	var down time.Time // since when it is not connected
	failures, lastErr := 0, ""
	for ctx.Err() == nil {
		sess, err := s.session(ctx)
		if err == nil {
			failures, lastErr = 0, ""
			s.state(State{Connected: true, Since: time.Now()})
			log.Info("notify: subscribed")
			select {
			case <-ctx.Done():
				sess.Close()
				return
			case err = <-sess.Lost():
			}
			err = fmt.Errorf("connection to MQTT broker %s lost: %w", Redact(s.Config.URL), err)
			log.Warn("notify: connection to the broker lost; polling on schedule continues", keyError, err.Error())
			down = time.Time{}
		}
		if ctx.Err() != nil {
			return
		}
		if down.IsZero() {
			down = time.Now()
		}
		failures++
		wait := delay(failures)
		s.state(State{Since: down, Err: err})
		if msg := err.Error(); msg != lastErr {
			// Once per cause, not at every attempt.
			log.Warn("notify: cannot subscribe; polling on schedule continues", keyError, msg, keyRetry, wait.String())
			lastErr = msg
		}
		if backoff.Sleep(ctx, wait) != nil {
			return
		}
	}
}

// session connects and subscribes through the registered transport.
func (s *Subscriber) session(ctx context.Context) (Session, error) {
	t, err := transport()
	if err != nil {
		return nil, err
	}
	return t.Subscribe(ctx, s.Config, s.ClientID, func(payload []byte) {
		if s.OnMessage != nil {
			s.OnMessage(payload)
		}
	})
}

func (s *Subscriber) state(st State) {
	if s.OnState != nil {
		s.OnState(st)
	}
}
