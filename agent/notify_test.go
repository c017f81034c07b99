package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testmqtt"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
)

// fakeClock is a NotifyClock that moves only when a test advances it; a
// timer due by then runs in Advance, before it returns.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: clockT0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// Advance moves the clock by d and runs the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.stopped:
		case !tm.at.After(c.now):
			tm.stopped = true
			due = append(due, tm.f)
		default:
			kept = append(kept, tm)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// notified is a notifier fed by a subscription to a real broker, with a
// trigger that counts and an injected clock.
type notified struct {
	*notifier
	clock    *fakeClock
	triggers atomic.Int64
	metrics  *status.Metrics
	applied  atomic.Value
}

func newNotified(t *testing.T, cfg manifest.MQTTNotify) *notified {
	t.Helper()
	n := &notified{clock: newFakeClock(), metrics: status.NewMetrics()}
	n.applied.Store("")
	n.notifier = &notifier{
		trigger: func() bool { n.triggers.Add(1); return true },
		applied: func() string { return n.applied.Load().(string) },
		count:   n.metrics.Notified,
		clock:   n.clock,
		log:     slog.New(slog.DiscardHandler),
	}
	connected := make(chan struct{}, 1)
	sub := &notify.Subscriber{Config: cfg, ClientID: "tend-" + t.Name(), OnMessage: n.message,
		OnState: func(st notify.State) {
			if st.Connected {
				connected <- struct{}{}
			}
		}}
	sub.Start(context.Background())
	t.Cleanup(sub.Stop)
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("not subscribed")
	}
	return n
}

// counts returns tend_notify_total by result.
func (n *notified) counts(t *testing.T) map[string]float64 {
	got := scrape(t, n.metrics)
	out := map[string]float64{}
	for _, r := range []string{status.NotifyTick, status.NotifySkipped, status.NotifyError} {
		out[r] = got[`tend_notify_total{result="`+r+`"}`]
	}
	return out
}

// waitCounted waits until n messages are counted.
func (n *notified) waitCounted(t *testing.T, total float64) map[string]float64 {
	t.Helper()
	var c map[string]float64
	require.Eventually(t, func() bool {
		c = n.counts(t)
		return c[status.NotifyTick]+c[status.NotifySkipped]+c[status.NotifyError] == total
	}, 30*time.Second, 5*time.Millisecond)
	return c
}

// publish sends payload as it is, QoS 1, and returns once the broker
// acknowledged it.
func publish(t *testing.T, cfg manifest.MQTTNotify, payload string) {
	t.Helper()
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(cfg.URL).SetClientID("test-publisher"))
	tok := c.Connect()
	require.True(t, tok.WaitTimeout(30*time.Second))
	require.NoError(t, tok.Error())
	defer c.Disconnect(0)
	tok = c.Publish(cfg.Topic, 1, false, payload)
	require.True(t, tok.WaitTimeout(30*time.Second))
	require.NoError(t, tok.Error())
}

// A flood of messages asks for one tick at once and one at the end of the
// window, whatever their number; after the window the next message ticks
// at once again.
func TestNotifyFloodTicksOncePerWindow(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}
	n := newNotified(t, cfg)
	for i := range 50 {
		publish(t, cfg, fmt.Sprintf(`{"revision":"main@sha1:%040d"}`, i))
	}
	require.Equal(t, map[string]float64{status.NotifyTick: 2, status.NotifySkipped: 48, status.NotifyError: 0}, n.waitCounted(t, 50))
	require.Equal(t, int64(1), n.triggers.Load(), "one tick at once, one held to the window's end")

	n.clock.Advance(NotifyWindow - time.Millisecond)
	require.Equal(t, int64(1), n.triggers.Load())
	n.clock.Advance(time.Millisecond)
	require.Equal(t, int64(2), n.triggers.Load(), "the held tick at the window's end")
	n.clock.Advance(time.Hour)
	require.Equal(t, int64(2), n.triggers.Load(), "nothing more was held")

	publish(t, cfg, `{}`)
	n.waitCounted(t, 51)
	require.Equal(t, int64(3), n.triggers.Load(), "a window after the last notified tick, a message ticks at once")
}

// The payload is never trusted: a revision already applied asks for no
// tick, and what is not {"revision": "…"} is ignored; both are counted.
func TestNotifyPayloads(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	cfg := manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}
	n := newNotified(t, cfg)
	commit := "0123456789abcdef0123456789abcdef01234567"
	n.applied.Store("main@sha1:" + commit)
	for _, p := range []string{`{"revision":"main@sha1:` + commit + `"}`, `{"revision":"` + commit + `"}`, `{"revision":"sha1:` + commit + `"}`} {
		publish(t, cfg, p)
	}
	require.Equal(t, map[string]float64{status.NotifySkipped: 3, status.NotifyTick: 0, status.NotifyError: 0}, n.waitCounted(t, 3))
	for _, p := range []string{"merged!", `["main"]`, `{"revision": 7}`, "null"} {
		publish(t, cfg, p)
	}
	require.Equal(t, map[string]float64{status.NotifySkipped: 3, status.NotifyTick: 0, status.NotifyError: 4}, n.waitCounted(t, 7))
	require.Zero(t, n.triggers.Load())

	publish(t, cfg, `{"revision":"main@sha1:fedcba9876543210fedcba9876543210fedcba98"}`)
	require.Equal(t, map[string]float64{status.NotifySkipped: 3, status.NotifyTick: 1, status.NotifyError: 4}, n.waitCounted(t, 8))
	require.Equal(t, int64(1), n.triggers.Load(), "another revision ticks")
}

func TestSameRevision(t *testing.T) {
	applied := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	for notified, want := range map[string]bool{
		applied: true, "0123456789abcdef0123456789abcdef01234567": true, "sha1:0123456789abcdef0123456789abcdef01234567": true,
		"0123456": false, "main@sha1:fedcba9876543210fedcba9876543210fedcba98": false, "main": false, "": false,
	} {
		require.Equal(t, want, sameRevision(notified, applied), notified)
	}
	require.False(t, sameRevision("", ""))
}

// notifyLoop is an agent loop with notify.mqtt whose ticks a test waits
// for.
type notifyLoop struct {
	*Loop
	ticks chan error
	mu    *sync.Mutex // of logs
	logs  *bytes.Buffer
}

// log is what the loop logged so far.
func (nl *notifyLoop) log() string {
	nl.mu.Lock()
	defer nl.mu.Unlock()
	return nl.logs.String()
}

func startNotifyLoop(t *testing.T, c *manifest.AgentConfig, schedule time.Duration) *notifyLoop {
	t.Helper()
	return startNotifyLoopOn(t, c, schedule, nil)
}

// startNotifyLoopOn starts a notifyLoop whose notify window and tries run
// on clock (nil: the system's).
func startNotifyLoopOn(t *testing.T, c *manifest.AgentConfig, schedule time.Duration, clock NotifyClock) *notifyLoop {
	t.Helper()
	nl := &notifyLoop{ticks: make(chan error, 100), logs: &bytes.Buffer{}}
	nl.mu = &sync.Mutex{}
	log := slog.New(slog.NewTextHandler(lockedWriter{nl.mu, nl.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nl.Loop = NewLoop(&Reconciler{Config: c, Logger: log}, LoopOptions{
		Schedule: everyTick(schedule),
		OnTick:   func(_ *Result, err error) { nl.ticks <- err },
		Notify:   NotifyOptions{Clock: clock, Backoff: func(int) time.Duration { return 20 * time.Millisecond }},
	})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, nl.Start(ctx))
	t.Cleanup(func() { cancel(); _ = nl.Stop() })
	return nl
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (nl *notifyLoop) tick(t *testing.T) {
	t.Helper()
	select {
	case err := <-nl.ticks:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("no tick")
	}
}

func (nl *notifyLoop) waitNotify(t *testing.T, ok func(*status.Notify) bool) *status.Notify {
	t.Helper()
	var s *status.Notify
	require.Eventually(t, func() bool {
		s = nl.tracker.Status().Notify
		return s != nil && ok(s)
	}, 30*time.Second, 5*time.Millisecond)
	return s
}

// With a schedule of an hour, a message ticks now: a new commit is applied
// long before the next scheduled tick. The broker killed and restarted,
// the agent says so in status, subscribes again and the next message
// ticks too.
func TestNotifyTicksTheAgentNow(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "one"))
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	c.Notify = &manifest.Notify{MQTT: &manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}}
	nl := startNotifyLoop(t, c, time.Hour)
	nl.tick(t) // the first, at start
	st := nl.waitNotify(t, func(s *status.Notify) bool { return s.Connected })
	require.Equal(t, &status.Notify{Broker: b.URL, Topic: "tend/fleet/main", Connected: true, Since: st.Since}, st)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "two"))
	two := repo.Commit("two")
	publish(t, *c.Notify.MQTT, `{"revision":"`+two+`"}`)
	nl.tick(t)
	require.Equal(t, "HEAD@sha1:"+two, nl.tracker.Status().AppliedRevision)
	require.Equal(t, 1.0, scrape(t, nl.metrics)[`tend_notify_total{result="tick"}`])

	b.Kill()
	down := nl.waitNotify(t, func(s *status.Notify) bool { return !s.Connected && strings.Contains(s.Error, "cannot reach") })
	require.Contains(t, down.Error, "cannot reach MQTT broker "+b.URL+": dial tcp ")
	var text bytes.Buffer
	require.NoError(t, status.WriteText(&text, nl.tracker.Status(), time.Now()))
	require.Contains(t, text.String(), "Notify:           not connected to "+b.URL+" since ")
	require.Contains(t, text.String(), "; polling on schedule continues")

	b.Restart()
	nl.waitNotify(t, func(s *status.Notify) bool { return s.Connected })
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "three"))
	three := repo.Commit("three")
	// The window after the last notified tick may not be over: the tick
	// comes at its end at the latest.
	publish(t, *c.Notify.MQTT, `{"revision":"`+three+`"}`)
	nl.tick(t)
	require.Equal(t, "HEAD@sha1:"+three, nl.tracker.Status().AppliedRevision)
}

// pending counts the timers not yet run or stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.stopped {
			n++
		}
	}
	return n
}

// CI notified before its push landed: the tick finds the source at the
// revision it had, says so and ticks again after a backoff; once the push
// lands, the next try applies it. A revision that never lands is tried
// for NotifyRetryFor, then left to the schedule, and the log says so.
func TestNotifyBeforePublishTriesAgain(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "one"))
	one := repo.Commit("one")
	c := newConfig(t, repo.Dir())
	c.Notify = &manifest.Notify{MQTT: &manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main"}}
	clock := newFakeClock()
	nl := startNotifyLoopOn(t, c, time.Hour, clock)
	nl.tick(t) // the first, at start
	nl.waitNotify(t, func(s *status.Notify) bool { return s.Connected })

	// The commit exists, but the branch the device follows is not there
	// yet: CI notified before its push.
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "two"))
	two := repo.Commit("two")
	repo.ResetHard(one)
	logged := func(s ...string) func() bool {
		return func() bool {
			for _, l := range strings.Split(nl.log(), "\n") {
				if containsAll(l, s) {
					return true
				}
			}
			return false
		}
	}
	publish(t, *c.Notify.MQTT, `{"revision":"`+two+`"}`)
	require.Eventually(t, logged("notify: the source does not have the notified revision yet", "revision="+two+" has=HEAD@sha1:"+one+" in=2s try=1"),
		30*time.Second, 5*time.Millisecond)
	require.Equal(t, "HEAD@sha1:"+one, nl.tracker.Status().AppliedRevision)
	require.Equal(t, 1, clock.pending(), "a try is due")

	repo.ResetHard(two) // the push lands
	clock.Advance(2 * time.Second)
	require.Eventually(t, logged("notify: the source has the notified revision now", "revision="+two+" tries=1"), 30*time.Second, 5*time.Millisecond)
	require.Equal(t, "HEAD@sha1:"+two, nl.tracker.Status().AppliedRevision)
	require.Zero(t, clock.pending(), "found: nothing more to try")

	// A revision that never lands: tried until NotifyRetryFor has passed.
	never := "0123456789abcdef0123456789abcdef01234567"
	clock.Advance(NotifyWindow) // past the window of the last notified tick
	publish(t, *c.Notify.MQTT, `{"revision":"main@sha1:`+never+`"}`)
	gaveUp := logged("notify: the source still does not have the notified revision; polling on schedule continues",
		"revision=main@sha1:"+never+" has=HEAD@sha1:"+two+" waited=2m0s")
	for tries := 0; !gaveUp(); tries++ {
		require.Less(t, tries, 10, nl.log())
		require.Eventually(t, func() bool { return clock.pending() == 1 || gaveUp() }, 30*time.Second, 5*time.Millisecond)
		if !gaveUp() {
			clock.Advance(30 * time.Second) // no try waits longer
		}
	}
	require.Zero(t, clock.pending(), "given up: the schedule takes over")
}

// A notified commit of another ref than the one the device follows is
// not waited for; one of the same ref, or of no ref named, is.
func TestNotifyWaitsOnlyForItsRef(t *testing.T) {
	clock := newFakeClock()
	n := &notifier{trigger: func() bool { return true }, applied: func() string { return "" }, count: func(string) {},
		clock: clock, log: slog.New(slog.DiscardHandler)}
	at := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	n.ticked(at)
	for rev, waits := range map[string]bool{
		"release@sha1:fedcba9876543210fedcba9876543210fedcba98":         false,
		"refs/heads/main@sha1:fedcba9876543210fedcba9876543210fedcba98": true,
		"HEAD@sha1:fedcba9876543210fedcba9876543210fedcba98":            true,
		"fedcba9876543210fedcba9876543210fedcba98":                      true,
		"not a revision": false,
	} {
		n.mu.Lock()
		n.await(rev, at, clock.Now())
		waiting := !n.want.IsZero()
		n.mu.Unlock()
		require.Equal(t, waits, waiting, rev)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A broker that refuses the agent's credentials: status says so, and the
// agent polls on its schedule as without notify.
func TestNotifyRefusedCredentialsKeepsPolling(t *testing.T) {
	b := testmqtt.Start(t, testmqtt.Options{Users: map[string]string{"cam-017": "right"}})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "one"))
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	dir := t.TempDir()
	c.Notify = &manifest.Notify{MQTT: &manifest.MQTTNotify{URL: b.URL, Topic: "tend/fleet/main",
		UsernameFile: writeSecret(t, dir, "user", "cam-017\n"), PasswordFile: writeSecret(t, dir, "password", "wrong-secret\n")}}
	nl := startNotifyLoop(t, c, 20*time.Millisecond)
	st := nl.waitNotify(t, func(s *status.Notify) bool { return strings.Contains(s.Error, "refused") })
	require.False(t, st.Connected)
	require.Contains(t, st.Error, "MQTT broker "+b.URL+" refused the connection (not Authorized) with the user name and password from ")
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "two"))
	two := repo.Commit("two")
	require.Eventually(t, func() bool { return nl.tracker.Status().AppliedRevision == "HEAD@sha1:"+two }, 60*time.Second, 10*time.Millisecond)
	require.NotContains(t, nl.log(), "wrong-secret")
	require.Contains(t, nl.log(), "notify: cannot subscribe; polling on schedule continues")
}

func writeSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
	return f
}
