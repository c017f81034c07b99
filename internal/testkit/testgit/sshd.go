package testgit

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SSHD is a real OpenSSH server on a loopback port. It lets the current
// user in with a generated key and runs git-upload-pack for it, so a
// repository in repoParent/NAME is at URL + "/NAME" (Repo.URL works).
type SSHD struct {
	// URL is ssh://USER@127.0.0.1:PORT followed by the absolute path of
	// the repository parent folder.
	URL  string
	Host string // 127.0.0.1
	Port int
	User string // the current user: the only one sshd lets in
	// KeyFile is the private key sshd accepts (ed25519, no passphrase).
	KeyFile string
	// HostKey is the server's public host key, "ssh-ed25519 AAAA…".
	HostKey string
	// KnownHostsFile holds the one line "[127.0.0.1]:PORT ssh-ed25519 AAAA…".
	KnownHostsFile string

	proc   *os.Process
	exited chan error // gets sshd's exit
	once   sync.Once
}

// Addr is host:port.
func (s *SSHD) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// KnownHostsLine is a known_hosts line that gives this server's address the
// public key pub ("TYPE BASE64").
func (s *SSHD) KnownHostsLine(pub string) string {
	return fmt.Sprintf("[%s]:%d %s\n", s.Host, s.Port, strings.TrimSpace(pub))
}

// Close stops sshd. It is safe to call more than once and is also called
// on t.Cleanup.
func (s *SSHD) Close() {
	s.once.Do(func() {
		_ = s.proc.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.proc.Kill()
			<-s.exited
		}
	})
}

// StartSSHD runs /usr/sbin/sshd in the foreground (-D -e) with a config,
// host key, user key and authorized_keys made in a temp folder, on a free
// loopback port, and waits until it accepts connections. sshd must be
// installed (Debian: openssh-server); without it the test is skipped, or
// fails when $CI is set (.ci/run sets it). With -short it is skipped. Run as root, it needs /run/sshd and makes it.
func StartSSHD(t testing.TB, repoParent string) *SSHD {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a real sshd; make test runs it, -short skips it")
	}
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		if sshd, err = exec.LookPath("sshd"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("testgit: sshd not found; install openssh-server")
			}
			t.Skip("testgit: sshd not found; install openssh-server to run ssh tests")
		}
	}
	parent, err := filepath.Abs(repoParent)
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	if os.Geteuid() == 0 {
		// sshd's privilege separation directory on Debian.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("testgit: %v", err)
		}
	}
	dir := t.TempDir()
	hostKey, hostPub := GenerateSSHKey(t)
	userKey, userPub := GenerateSSHKey(t)
	authorized := filepath.Join(dir, "authorized_keys")
	writeFile(t, authorized, userPub+"\n")

	s := &SSHD{Host: "127.0.0.1", User: u.Username, KeyFile: userKey, HostKey: hostPub}
	// A port picked free may be taken before sshd binds it: try again.
	for attempt := 0; ; attempt++ {
		s.Port = freePort(t)
		cfg := writeSSHDConfig(t, sshd, s, dir, hostKey, authorized)
		err := s.start(t, sshd, cfg)
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatalf("testgit: start sshd: %v", err)
		}
	}
	t.Cleanup(s.Close)
	s.URL = fmt.Sprintf("ssh://%s@%s%s", s.User, s.Addr(), filepath.ToSlash(parent))
	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	writeFile(t, s.KnownHostsFile, s.KnownHostsLine(hostPub))
	return s
}

// start runs sshd and waits until it accepts connections or exits.
func (s *SSHD) start(t testing.TB, sshd, cfg string) error {
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout = logWriter{t, "sshd"}
	cmd.Stderr = logWriter{t, "sshd"}
	// Sessions that outlive the listener share its standard error.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("sshd exited: %v (its log is above)", err)
		default:
		}
		if speaksSSH(s.Addr()) {
			s.proc, s.exited = cmd.Process, exited
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("sshd did not listen on %s within 10s", s.Addr())
}

// writeSSHDConfig writes dir/sshd_config, which lets s.User in with the
// key in authorized and nobody else in any other way, and gives
// git-upload-pack the tests' PATH and isolated Git configuration.
func writeSSHDConfig(t testing.TB, sshd string, s *SSHD, dir, hostKey, authorized string) string {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	path := filepath.Dir(gitPath) + ":/usr/local/bin:/usr/bin:/bin"
	lines := []string{
		"ListenAddress " + s.Addr(),
		"HostKey " + hostKey,
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"AuthorizedKeysFile " + authorized,
		"AllowUsers " + s.User,
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"UsePAM no",
		"StrictModes no",
		"LogLevel VERBOSE",
		"SetEnv PATH=" + path + " GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1",
	}
	cfg := filepath.Join(dir, "sshd_config")
	// OpenSSH 9.8 and later refuse, for a while, a client address whose
	// logins failed, and tests fail logins on purpose. Older versions do
	// not know the option and refuse the whole config.
	writeFile(t, cfg, strings.Join(append(lines, "PerSourcePenalties no"), "\n")+"\n")
	if exec.Command(sshd, "-t", "-f", cfg).Run() != nil {
		writeFile(t, cfg, strings.Join(lines, "\n")+"\n")
	}
	return cfg
}

// speaksSSH reports whether an ssh server answers at addr: something else
// may have taken the port picked for sshd.
func speaksSSH(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	banner := make([]byte, 4)
	_, err = io.ReadFull(c, banner)
	return err == nil && string(banner) == "SSH-"
}

// GenerateSSHKey makes an ed25519 key pair without passphrase with
// ssh-keygen in t.TempDir() and returns the private key's path and the
// public key ("ssh-ed25519 AAAA…", no comment).
func GenerateSSHKey(t testing.TB) (keyFile, pub string) {
	t.Helper()
	keyFile = filepath.Join(t.TempDir(), "id_ed25519")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", keyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("testgit: ssh-keygen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return keyFile, strings.TrimSpace(string(b))
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("testgit: %v", err)
	}
}
