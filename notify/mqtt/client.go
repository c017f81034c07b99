package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
)

// ConnectTimeout bounds one connection to the broker, TLS and CONNACK
// included.
const ConnectTimeout = 10 * time.Second

// clientOptions are paho's options for cfg, with the credentials read
// from their files now (so a rotated password is read at the next
// connection). Paho's own reconnection is off: the caller reconnects.
func clientOptions(cfg manifest.MQTTNotify, clientID string) (*paho.ClientOptions, error) {
	o := paho.NewClientOptions().
		AddBroker(cfg.URL).
		SetClientID(clientID).
		SetProtocolVersion(4). // MQTT 3.1.1
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(ConnectTimeout).
		SetWriteTimeout(ConnectTimeout).
		SetKeepAlive(30 * time.Second).
		SetPingTimeout(10 * time.Second).
		SetCustomOpenConnectionFn(openConn)
	if cfg.UsernameFile != "" {
		user, err := readSecret("user name", cfg.UsernameFile)
		if err != nil {
			return nil, err
		}
		o.SetUsername(user)
	}
	if cfg.PasswordFile != "" {
		password, err := readSecret("password", cfg.PasswordFile)
		if err != nil {
			return nil, err
		}
		o.SetPassword(password)
	}
	if manifest.MQTTUsesTLS(cfg.URL) {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read the broker's CA file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate: give the PEM bundle of the CA that signed the broker's certificate", cfg.CAFile)
			}
		}
		o.SetTLSConfig(tc)
	}
	return o, nil
}

// readSecret reads a credential file, without its trailing newline. The
// error names the file, never its content.
func readSecret(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the MQTT %s: %w", what, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("MQTT %s file %s is empty", what, path)
	}
	return s, nil
}

// wait waits for tok, or for ctx to end.
func wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connect connects c to the broker at cfg.URL, and says what failed and
// what to do when it cannot.
func connect(ctx context.Context, c paho.Client, cfg manifest.MQTTNotify) error {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout+time.Second)
	defer cancel()
	if err := wait(ctx, c.Connect()); err != nil {
		c.Disconnect(0) // abandons an attempt still under way
		return connectError(cfg, err)
	}
	return nil
}

// connectError says why the broker could not be reached or refused the
// connection, and what to do.
func connectError(cfg manifest.MQTTNotify, err error) error {
	broker := notify.Redact(cfg.URL)
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		// Paho's "network Error : dial tcp …": the second says it.
		if errs := joined.Unwrap(); len(errs) == 2 && errors.Is(errs[0], packets.ErrorNetworkError) {
			err = errs[1]
		}
	}
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		what := "no user name"
		if cfg.UsernameFile != "" {
			what = "the user name and password from " + cfg.UsernameFile
			if cfg.PasswordFile != "" {
				what += " and " + cfg.PasswordFile
			}
		}
		return fmt.Errorf("MQTT broker %s refused the connection (%s) with %s: check them against the broker's password file and ACL: %w",
			broker, packets.ErrorRefusedNotAuthorised.Error(), what, err)
	case errors.Is(err, packets.ErrorRefusedIDRejected), errors.Is(err, packets.ErrorRefusedServerUnavailable), errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return fmt.Errorf("MQTT broker %s refused the connection: %w; it must speak MQTT 3.1.1 and accept client ids of the form tend-DEVICE", broker, err)
	case errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &hostname):
		return fmt.Errorf("MQTT broker %s: TLS: %w; give the CA that signed its certificate as caFile (--ca-file), and use the host name the certificate names", broker, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("MQTT broker %s did not answer within %s: check the URL, that the broker runs and that nothing drops the connection", broker, ConnectTimeout)
	}
	return fmt.Errorf("cannot reach MQTT broker %s: %w; check the URL and that the broker runs and listens there", broker, err)
}
