package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
)

// Kinds of artifact, as tend_verify_total's kind label names them.
const (
	KindSource = "source"
	KindModel  = "model"
	KindImage  = "image"
)

// Results, as tend_verify_total's result label names them.
const (
	ResultOK     = "ok"
	ResultFailed = "failed"
)

// maxRemembered bounds the verified digests a Verifier remembers (and
// the failures VerifyCandidate and Recheck do, and the fingerprints of
// requirements); past it it forgets them all and verifies again as they
// come.
const maxRemembered = 4096

// Target is the artifact to verify: its manifest digest in a repository.
type Target struct {
	Kind       string          // KindSource, KindModel or KindImage
	ID         string          // the resource it is for, e.g. model/detector; may be empty
	Repository name.Repository // where its signatures are
	Digest     string          // sha256:… of its manifest or index
}

// Verifier checks targets against verify blocks and remembers the digests
// that passed, per requirement. It is safe for concurrent use.
type Verifier struct {
	// Options reach the registries.
	Options transport.Options
	// Observe, when set, hears each verification that asked a registry:
	// its kind and ResultOK or ResultFailed.
	Observe func(kind, result string)
	// Now is the clock the failures VerifyCandidate and Recheck remember
	// are read with; nil means time.Now.
	Now func() time.Time

	requests atomic.Int64
	mu       sync.Mutex
	verified map[string]bool // repository@digest fingerprint
	// failed holds, by the fingerprints of a target's requirements, the
	// failures VerifyCandidate and Recheck remember.
	failed map[string]failure
	// fingerprints holds the fingerprint of each requirement by its id.
	fingerprints map[string]memo
}

// Requests is how many requests the Verifier has sent, in all.
func (v *Verifier) Requests() int64 { return v.requests.Load() }

// Verify returns nil when t carries a signature satisfying each of reqs
// (every one must be; nil entries and an empty list ask for nothing). A
// failure is an *Error (wrapping ErrUnsigned) naming t, the requirement
// and what was found, or an error reaching the registry.
func (v *Verifier) Verify(ctx context.Context, t Target, reqs []*manifest.ArtifactVerify) error {
	all, keys, err := v.requirements(t, reqs)
	if err != nil {
		return err
	}
	return v.verifyKeyed(ctx, t, all, keys)
}

// requirements lists the requirements of reqs, each with the key t is
// remembered by once verified under it.
func (v *Verifier) requirements(t Target, reqs []*manifest.ArtifactVerify) ([]requirement, []string, error) {
	var all []requirement
	var keys []string
	for _, r := range reqs {
		if r == nil {
			continue
		}
		for _, q := range []requirement{{cosign: r.Cosign}, {notation: r.Notation}} {
			if q.cosign == nil && q.notation == nil {
				continue
			}
			fp, err := v.fingerprint(q)
			if err != nil {
				return nil, nil, fmt.Errorf("%s %s@%s: %w", t.ID, t.Repository, t.Digest, err)
			}
			all = append(all, q)
			keys = append(keys, t.Repository.String()+"@"+t.Digest+" "+fp)
		}
	}
	return all, keys, nil
}

// verifyKeyed verifies t against the requirements of all not remembered
// by their keys, and remembers those that pass.
func (v *Verifier) verifyKeyed(ctx context.Context, t Target, all []requirement, keys []string) error {
	var todo []requirement
	var todoKeys []string
	for i, q := range all {
		if !v.remembered(keys[i]) {
			todo = append(todo, q)
			todoKeys = append(todoKeys, keys[i])
		}
	}
	if len(todo) == 0 {
		return nil
	}
	keys = todoKeys
	err := v.verify(ctx, t, todo)
	result := ResultOK
	if err != nil {
		result = ResultFailed
	} else {
		v.remember(keys)
	}
	if v.Observe != nil {
		v.Observe(t.Kind, result)
	}
	return err
}

// requirement is one signature requirement of a verify block: its cosign
// or its notation block.
type requirement struct {
	cosign   *manifest.CosignVerify
	notation *manifest.NotationVerify
}

// verify checks t against each requirement of todo, asking the registry
// for its cosign signatures once (and for its Notation signatures per
// notation block), through the checkers registered for them.
func (v *Verifier) verify(ctx context.Context, t Target, todo []requirement) error {
	if !validDigest(t.Digest) {
		return fmt.Errorf("%s %s@%s: not a sha256 digest", t.ID, t.Repository, t.Digest)
	}
	rt, err := v.Options.RepoTransport(ctx, t.Repository)
	if err != nil {
		return fmt.Errorf("%s: look up the signatures of %s@%s: %w", t.ID, t.Repository, short(t.Digest), err)
	}
	sigs := &Signatures{c: &client{rt: rt, repo: t.Repository}, digest: t.Digest}
	defer func() { v.requests.Add(int64(sigs.c.requests)) }()
	for _, q := range todo {
		if q.notation != nil {
			check, err := notationChecker()
			if err != nil {
				return fmt.Errorf("%s %s@%s: %w", t.ID, t.Repository, short(t.Digest), err)
			}
			if err := check(ctx, sigs.Transport(), t, q.notation); err != nil {
				return err
			}
			continue
		}
		load, err := cosignLoader()
		if err != nil {
			return fmt.Errorf("%s %s@%s: %w", t.ID, t.Repository, short(t.Digest), err)
		}
		p, err := load(q.cosign)
		if err != nil {
			return fmt.Errorf("%s %s@%s: %w", t.ID, t.Repository, short(t.Digest), err)
		}
		if err := p.Check(ctx, sigs, t); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return err
			}
			return fmt.Errorf("%s: look up the signatures of %s@%s: %w", t.ID, t.Repository, short(t.Digest), err)
		}
	}
	return nil
}

func (v *Verifier) remembered(k string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.verified[k]
}

func (v *Verifier) remember(keys []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verified == nil || len(v.verified)+len(keys) > maxRemembered {
		v.verified = map[string]bool{}
	}
	for _, k := range keys {
		v.verified[k] = true
	}
}
