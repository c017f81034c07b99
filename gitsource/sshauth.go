package gitsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/net/proxy"

	"github.com/tend-dev/tend/source"
)

// sshAccess authenticates with the key in sshKeyFile (or a password from
// the URL) and checks the host key against knownHostsFile.
func (a Auth) sshAccess(stored string, urlAuth transport.AuthMethod, log *slog.Logger) (access, error) {
	shown := source.RedactURL(stored)
	ep, err := transport.NewEndpoint(stored)
	if err != nil {
		return access{}, fmt.Errorf("parse repository URL %s: %w", shown, err)
	}
	port := ep.Port
	if port <= 0 {
		port = gitssh.DefaultPort
	}
	addr := net.JoinHostPort(strings.Trim(ep.Host, "[]"), strconv.Itoa(port))

	var helper gitssh.HostKeyCallbackHelper
	switch {
	case a.KnownHostsFile != "" && a.InsecureIgnoreHostKey:
		return access{}, fmt.Errorf("set %s or %s, not both", fieldKnownHosts, fieldInsecure)
	case a.InsecureIgnoreHostKey:
		log.Warn("host key not checked: "+fieldInsecure+" is set, so anyone on the network path can pose as the Git server", logKeyURL, shown)
		helper.HostKeyCallback = ssh.InsecureIgnoreHostKey()
	case a.KnownHostsFile != "":
		if helper, err = knownHosts(a.KnownHostsFile, addr); err != nil {
			return access{}, err
		}
	default:
		return access{}, fmt.Errorf("source.url %s is ssh: set %s to a known_hosts file with the server's host key (ssh-keyscan %s), so that tend knows it talks to the right server", shown, fieldKnownHosts, keyscanArgs(ep.Host, port))
	}

	user := ep.User
	if user == "" {
		user = DefaultSSHUser
	}
	var method gitssh.AuthMethod
	switch pw, ok := urlAuth.(*gitssh.Password); {
	case a.SSHKeyFile != "":
		pem, err := os.ReadFile(a.SSHKeyFile)
		if err != nil {
			return access{}, fmt.Errorf("%s: %w", fieldSSHKey, err)
		}
		// As gitssh.NewPublicKeysFromFile, with a message of tend's own
		// for a key that needs a passphrase.
		signer, err := ssh.ParsePrivateKey(pem)
		var encrypted *ssh.PassphraseMissingError
		if errors.As(err, &encrypted) {
			return access{}, fmt.Errorf("%s %s is encrypted with a passphrase; tend needs a key without one (protect it with file permissions instead)", fieldSSHKey, a.SSHKeyFile)
		}
		if err != nil {
			return access{}, fmt.Errorf("%s %s: %w", fieldSSHKey, a.SSHKeyFile, err)
		}
		method = &gitssh.PublicKeys{User: user, Signer: signer, HostKeyCallbackHelper: helper}
	case ok:
		method = &gitssh.Password{User: pw.User, Password: pw.Password, HostKeyCallbackHelper: helper}
	default:
		return access{}, fmt.Errorf("source.url %s is ssh: set %s to the private key to log in with", shown, fieldSSHKey)
	}
	return access{auth: &sshAuth{method}}, nil
}

// sshAuth adds a connect timeout to an ssh auth method.
type sshAuth struct{ gitssh.AuthMethod }

func (s *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	cfg, err := s.AuthMethod.ClientConfig()
	if err == nil {
		cfg.Timeout = sshDialTimeout
	}
	return cfg, err
}

// deadlineScheme is the "proxy" URL scheme that carries a fetch's deadline
// into go-git's ssh transport, as tend-deadline://deadline?until=<unix ns>.
// go-git bounds only the TCP connect of an ssh fetch and watches the
// fetch's context only once connected: a server that accepts the connection
// but never sends its banner would hold the fetch forever. The dialer
// registered for this scheme dials directly, with no proxy, and sets the
// deadline on the connection, so every read and write fails after it.
const deadlineScheme = "tend-deadline"

func init() {
	proxy.RegisterDialerType(deadlineScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		ns, err := strconv.ParseInt(u.Query().Get("until"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ssh deadline: %w", err)
		}
		return deadlineDialer{until: time.Unix(0, ns)}, nil
	})
}

// deadlineProxy is what makes go-git's ssh transport use deadlineDialer.
func deadlineProxy(until time.Time) transport.ProxyOptions {
	return transport.ProxyOptions{URL: fmt.Sprintf("%s://deadline?until=%d", deadlineScheme, until.UnixNano())}
}

// deadlineDialer dials TCP directly and sets until as the deadline of the
// connection.
type deadlineDialer struct{ until time.Time }

func (d deadlineDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d deadlineDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithDeadline(ctx, d.until)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(d.until); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// knownHosts checks host keys against file. Only the key types file holds
// for addr are offered to the server, so it presents one that can match.
func knownHosts(file, addr string) (gitssh.HostKeyCallbackHelper, error) {
	// go-git's message for a missing file points at SSH_KNOWN_HOSTS.
	if _, err := os.Stat(file); err != nil {
		return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("%s: %w", fieldKnownHosts, err)
	}
	db, err := gitssh.NewKnownHostsDb(file)
	if err != nil {
		return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("%s: %w", fieldKnownHosts, err)
	}
	check := db.HostKeyCallback()
	return gitssh.HostKeyCallbackHelper{
		HostKeyAlgorithms: db.HostKeyAlgorithms(addr),
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			if err := check(host, remote, key); err != nil {
				return &hostKeyError{host: host, file: file, key: key, err: err}
			}
			return nil
		},
	}, nil
}

// hostKeyError is a host key that known_hosts does not vouch for.
type hostKeyError struct {
	host, file string
	key        ssh.PublicKey
	err        error
}

func (e *hostKeyError) Error() string {
	var ke *xknownhosts.KeyError
	var fp string
	if e.key != nil {
		fp = e.key.Type() + " " + ssh.FingerprintSHA256(e.key)
	}
	if errors.As(e.err, &ke) && len(ke.Want) > 0 {
		return fmt.Sprintf("host key of %s (%s) does not match %s %s: the server's key changed, or someone is posing as it; check with the server's owner before updating the file",
			e.host, fp, fieldKnownHosts, e.file)
	}
	if errors.As(e.err, &ke) {
		h, p, _ := net.SplitHostPort(e.host)
		port, _ := strconv.Atoi(p)
		return fmt.Sprintf("host key of %s (%s) is unknown: it is not in %s %s; check the fingerprint with the server's owner and add it (ssh-keyscan %s)",
			e.host, fp, fieldKnownHosts, e.file, keyscanArgs(h, port))
	}
	return fmt.Sprintf("check host key of %s against %s %s: %v", e.host, fieldKnownHosts, e.file, e.err)
}

func (e *hostKeyError) Unwrap() error { return e.err }

// keyscanArgs are the ssh-keyscan arguments that print host's keys.
func keyscanArgs(host string, port int) string {
	host = strings.Trim(host, "[]")
	if port == 0 || port == gitssh.DefaultPort {
		return host
	}
	return fmt.Sprintf("-p %d %s", port, host)
}

// permanentError is a configuration problem only a person can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
