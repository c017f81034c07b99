package testmqtt

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testserver"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// Options say how the broker accepts clients.
type Options struct {
	// Users, when set, are the only clients accepted, by user name and
	// password; anonymous clients are refused.
	Users map[string]string
	// TLS serves MQTT over TLS with a certificate of a CA made for the
	// test (Broker.CAFile).
	TLS bool
}

// Broker is a running mosquitto.
type Broker struct {
	// URL is what a client dials: tcp://127.0.0.1:PORT, or
	// ssl://127.0.0.1:PORT with TLS.
	URL string
	// CAFile is the PEM of the CA of the broker's certificate, with TLS.
	CAFile string

	t    testing.TB
	bin  string
	conf string
	addr string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *bytes.Buffer
}

// Start runs mosquitto until the test ends. Without the binary the test is
// skipped, except in CI (CI set in the environment), where .ci/run
// installs it and its absence is a failure. With -short it is skipped.
func Start(t testing.TB, o Options) *Broker {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a mosquitto broker; make test runs it, -short skips it")
	}
	bin := testserver.Program(t, "mosquitto", "mosquitto")
	addr := testserver.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	b := &Broker{t: t, bin: bin, addr: addr, conf: filepath.Join(dir, "mosquitto.conf"), URL: "tcp://" + addr}
	conf := []string{
		"listener " + port + " 127.0.0.1",
		"persistence false",
		"log_dest stderr",
		"log_type error",
		"log_type warning",
		"log_type notice",
	}
	if os.Geteuid() == 0 {
		// Else mosquitto drops to the user mosquitto, who cannot read
		// the test's files.
		conf = append(conf, "user root")
	}
	if len(o.Users) > 0 {
		conf = append(conf, "allow_anonymous false", "password_file "+writePasswords(t, dir, o.Users))
	} else {
		conf = append(conf, "allow_anonymous true")
	}
	if o.TLS {
		b.URL = "ssl://" + addr
		cert, key := writeServerCert(t, dir)
		b.CAFile = filepath.Join(dir, "ca.pem")
		conf = append(conf, "cafile "+b.CAFile, "certfile "+cert, "keyfile "+key)
	}
	if err := os.WriteFile(b.conf, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	t.Cleanup(func() {
		b.Kill()
	})
	return b
}

// Kill stops the broker at once (SIGKILL): its clients see the connection
// drop.
func (b *Broker) Kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	if b.t.Failed() {
		b.t.Logf("mosquitto output:\n%s", b.out.String())
	}
	b.cmd = nil
}

// Restart starts the killed broker again, on the same port.
func (b *Broker) Restart() {
	b.t.Helper()
	b.start()
}

func (b *Broker) start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.t.Fatal("testmqtt: the broker is running")
	}
	cmd := exec.Command(b.bin, "-c", b.conf)
	b.out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start mosquitto: %v", err)
	}
	b.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b.cmd = nil
			b.t.Fatalf("mosquitto did not listen on %s: %v\n%s", b.addr, err, b.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writePasswords writes a mosquitto password file with mosquitto_passwd,
// which the mosquitto package installs beside the broker.
func writePasswords(t testing.TB, dir string, users map[string]string) string {
	t.Helper()
	file := filepath.Join(dir, "passwords")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		out, err := exec.Command("mosquitto_passwd", "-b", file, u, users[u]).CombinedOutput()
		if err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
	return file
}

// writeServerCert writes a CA (ca.pem) and a certificate for 127.0.0.1
// it signed, and returns the certificate's and its key's files.
func writeServerCert(t testing.TB, dir string) (cert, key string) {
	t.Helper()
	ca := testgit.NewCA(t)
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	sc := ca.ServerCert(t)
	var chain []byte
	for _, der := range sc.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	der, err := x509.MarshalPKCS8PrivateKey(sc.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err := os.WriteFile(cert, chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
