package gitsource

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"

	"github.com/tend-dev/tend/source"
)

// FuzzRedact builds URLs with credentials from arbitrary parts. Neither
// RedactURL nor an error redacted for that URL ever shows the password,
// raw or percent-encoded, whatever it holds.
func FuzzRedact(f *testing.F) {
	f.Add("https", "deploy", "s3cr3t-token", "git.example.com", "fleet.git")
	f.Add("https", "x-access-token", "p@ss/w?rd#1 x", "git.example.com:8443", "org/fleet.git")
	f.Add("ssh", "git", "hunter22", "10.0.0.1", "~/fleet")
	f.Add("http", "", "tok%2Fen", "h", "")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, p string) {
		if len(pass) < minSecretLen || strings.ContainsAny(scheme, ":/@") {
			return
		}
		raw := scheme + "://" + user + ":" + pass + "@" + host + "/" + p
		public := scheme + "://" + host + "/" + p
		if strings.Contains(public, pass) {
			return // the secret is also what the URL is: nothing can hide it
		}
		shown := source.RedactURL(raw)
		if strings.Contains(shown, pass) {
			t.Fatalf("source.RedactURL(%q) = %q shows the password", raw, shown)
		}
		msg := func(u string) string {
			return redactErr(&url.Error{Op: "Get", URL: u, Err: errors.New("connection refused to " + u)}, u).Error()
		}
		got := msg(raw)
		visible := msg(public) // what the message shows of the URL without its credentials
		for _, form := range []string{pass, url.QueryEscape(pass), url.PathEscape(pass)} {
			if len(form) >= minSecretLen && strings.Contains(got, form) && !strings.Contains(visible, form) {
				t.Fatalf("redacted error %q shows the password as %q", got, form)
			}
		}
	})
}

// FuzzAdvertisement decodes arbitrary bytes as a server's ref
// advertisement (the body of GET /info/refs) and resolves refs against
// what it names. Nothing panics, and no ref resolves to the all-zero id.
func FuzzAdvertisement(f *testing.F) {
	advs, _ := filepath.Glob(filepath.Join("..", "testdata", "hostile", "git", "*.adv"))
	for _, p := range advs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "main")
	}
	f.Add([]byte("001e# service=git-upload-pack\n0000"+
		"003f8f4e8d7c6b5a49382716059483726150493827 refs/heads/main\x00\n0000"), "")
	f.Fuzz(func(t *testing.T, body []byte, ref string) {
		ar := packp.NewAdvRefs()
		if err := ar.Decode(bytes.NewReader(body)); err != nil {
			return
		}
		refs, err := ar.AllReferences()
		if err != nil {
			return
		}
		list := make([]*plumbing.Reference, 0, len(refs))
		for _, r := range refs {
			list = append(list, r)
		}
		got, err := resolveRemote(list, ref, "https://git.example.com/fleet.git")
		if err != nil {
			return
		}
		if got.prefix == "" && got.hash.IsZero() {
			t.Fatalf("ref %q resolved to the all-zero id", ref)
		}
	})
}
