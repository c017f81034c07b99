package testgit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, so that clients must be
// told to trust it: no system trust store knows it.
type CA struct {
	// File is the CA certificate in PEM, what a client's caFile names.
	File string
	// PEM is the content of File.
	PEM []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA and writes its certificate to a file in t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tend test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testgit: make CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	ca := &CA{
		File: filepath.Join(t.TempDir(), "ca.pem"),
		PEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		cert: cert,
		key:  key,
	}
	if err := os.WriteFile(ca.File, ca.PEM, 0o644); err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return ca
}

// ServerCert issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) ServerCert(t testing.TB) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testgit: issue server certificate: %v", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return key
}

// HTTPSServer serves Git repositories over smart HTTP on TLS, with a
// certificate from a CA of its own, optionally behind authentication.
type HTTPSServer struct {
	*HTTPServer        // URL is https://127.0.0.1:PORT
	CA          *CA    // the CA the server's certificate chains to
	CAFile      string // CA.File
	auth        *authCheck
}

// Users lists the basic-auth user names of the requests the server let
// in, in order.
func (s *HTTPSServer) Users() []string { return s.auth.seen() }

// StartHTTPS is StartHTTP on TLS: it serves every repository under
// parentDir with the real git http-backend, and asks clients for the
// credentials in opts. Clients must trust CAFile. It stops on t.Cleanup.
func StartHTTPS(t testing.TB, parentDir string, opts HTTPSOptions) *HTTPSServer {
	t.Helper()
	ca := NewCA(t)
	check := &authCheck{opts: opts, next: backendHandler(t, parentDir)}
	srv := httptest.NewUnstartedServer(check)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t)}}
	// Handshakes that clients refuse are expected in tests; say so in the
	// test log, not on standard error.
	srv.Config.ErrorLog = log.New(logWriter{t, "https server"}, "", 0)
	srv.StartTLS()
	s := &HTTPSServer{HTTPServer: &HTTPServer{URL: srv.URL, srv: srv}, CA: ca, CAFile: ca.File, auth: check}
	t.Cleanup(s.Close)
	return s
}
