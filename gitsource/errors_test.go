package gitsource_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

func TestFetchErrors(t *testing.T) {
	f := newFleet(t)
	srv := testgit.StartHTTP(t, filepath.Dir(f.repo.Dir()))
	httpURL := f.repo.URL(srv.URL)
	missingDir := filepath.Join(t.TempDir(), "no-such-repo")
	closed := testgit.StartHTTP(t, filepath.Dir(f.repo.Dir()))
	closed.Close()
	rev12 := f.c1[:12]

	cases := []struct {
		name     string
		src      gitsource.Source
		is       error    // nil: any error
		contains []string // in the message
	}{
		{"missing branch", gitsource.Source{URL: httpURL, Ref: "feature-x"},
			gitsource.ErrRefNotFound, []string{`ref "feature-x" not found in ` + httpURL, "tried branch and tag"}},
		{"missing commit", gitsource.Source{URL: f.repo.Dir(), Ref: "deadbeef"},
			gitsource.ErrRefNotFound, []string{`ref "deadbeef"`, f.repo.Dir(), "tried branch, tag and commit"}},
		{"missing full commit", gitsource.Source{URL: f.repo.Dir(), Ref: "0123456789012345678901234567890123456789"},
			gitsource.ErrRefNotFound, []string{"0123456789012345678901234567890123456789", "tried branch, tag and commit"}},
		{"missing path", gitsource.Source{URL: httpURL, Ref: "main", Path: "devices/cam-999"},
			source.ErrPathNotFound, []string{`path "devices/cam-999" not found in ` + httpURL + " at " + rev12}},
		{"path is a file", gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "root.yaml"},
			source.ErrPathNotFound, []string{`path "root.yaml" is a file, not a folder`, rev12}},
		{"path without manifests", gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "docs"},
			source.ErrPathNotFound, []string{`no *.yaml or *.yml files under "docs"`, rev12}},
		{"absolute path", gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "/etc"},
			nil, []string{`path "/etc" must be relative`}},
		{"path escape", gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/../../etc"},
			nil, []string{`path "devices/../../etc" must not contain ".."`}},
		{"no URL", gitsource.Source{Ref: "main"}, nil, []string{"no repository URL"}},
		{"missing local repo", gitsource.Source{URL: missingDir, Ref: "main"},
			nil, []string{"list refs of " + missingDir}},
		{"server down", gitsource.Source{URL: f.repo.URL(closed.URL), Ref: "main"},
			nil, []string{"list refs of " + f.repo.URL(closed.URL)}},
		{"credentials in URL", gitsource.Source{URL: "http://user:secret@127.0.0.1:1/x.git", Ref: "main"},
			nil, []string{"http://127.0.0.1:1/x.git"}},
		{"credentials in unreachable https URL", gitsource.Source{URL: "https://tok:secret@127.0.0.1:1/x.git", Ref: "main"},
			nil, []string{"https://127.0.0.1:1/x.git"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetch(t, t.TempDir(), tc.src)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			for _, s := range tc.contains {
				require.Contains(t, err.Error(), s)
			}
			t.Log(err)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestFetchHonoursContext(t *testing.T) {
	f := newFleet(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			src := gitsource.Source{URL: tr.url(t, f), Ref: "main", Path: "devices/cam-017"}
			_, err := gitsource.Fetch(ctx, src, gitsource.Options{Dir: t.TempDir()})
			require.Error(t, err)
			require.True(t, errors.Is(err, context.Canceled), "got %v", err)
		})
	}
}

func TestRedactURL(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"user and password", "https://user:secret@host/fleet.git", "https://host/fleet.git"},
		{"token only", "https://ghp_token@host:8443/fleet.git", "https://host:8443/fleet.git"},
		{"ssh user", "ssh://git@host/fleet.git", "ssh://host/fleet.git"},
		{"no userinfo", "https://host/fleet.git", "https://host/fleet.git"},
		{"local path", "/srv/git/fleet", "/srv/git/fleet"},
		{"file URL", "file:///srv/git/fleet", "file:///srv/git/fleet"},
		{"scp-like", "git@host:fleet.git", "git@host:fleet.git"},
		{"unparsable", "https://user:secret@host/%zz", "https://host/%zz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, source.RedactURL(tc.in))
		})
	}
}
