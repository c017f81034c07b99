package notation

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	notationgo "github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/dir"
	"github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
)

// storeFS serves a trust store folder laid out as Notation's
// (x509/ca/NAME/*.crt) where notation-go looks for truststore/x509/….
type storeFS struct {
	fs.FS
	dir string
}

func (s storeFS) SysPath(items ...string) (string, error) {
	rest, ok := strings.CutPrefix(path.Join(items...), dir.TrustStoreDir+"/")
	if !ok {
		return "", fmt.Errorf("%s is outside the trust store", path.Join(items...))
	}
	return filepath.Join(s.dir, filepath.FromSlash(rest)), nil
}

func init() { verify.RegisterNotation(check) }

var _ verify.NotationChecker = check

// check checks that t carries a Notation signature the trust policy and
// trust store of n allow, through the registry transport rt.
func check(ctx context.Context, rt http.RoundTripper, t verify.Target, n *manifest.NotationVerify) error {
	b, err := verify.ReadFile(n.TrustPolicy, verify.MaxTrustPolicyFile, "Notation trust policy")
	if err != nil {
		return err
	}
	var doc trustpolicy.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("trust policy %s: %w", n.TrustPolicy, err)
	}
	store := truststore.NewX509TrustStore(storeFS{FS: os.DirFS(n.TrustStore), dir: n.TrustStore})
	v, err := verifier.NewWithOptions(&doc, store, nil, verifier.VerifierOptions{})
	if err != nil {
		return fmt.Errorf("trust policy %s: %w", n.TrustPolicy, err)
	}
	repo, err := remote.NewRepository(t.Repository.RegistryStr() + "/" + t.Repository.RepositoryStr())
	if err != nil {
		return err
	}
	repo.PlainHTTP = t.Repository.Scheme() == "http"
	repo.Client = &http.Client{Transport: rt}
	repo.MaxMetadataBytes = verify.MaxIndexBytes
	_, _, err = notationgo.Verify(ctx, v, registry.NewRepository(repo), notationgo.VerifyOptions{
		ArtifactReference:    t.Repository.String() + "@" + t.Digest,
		MaxSignatureAttempts: verify.MaxSignatures,
	})
	if err != nil {
		return &verify.Error{ID: t.ID, Repository: t.Repository.String(), Digest: t.Digest,
			Requirement: "Notation signature the trust policy " + n.TrustPolicy + " allows",
			Found:       strings.ReplaceAll(err.Error(), "\n", ": "),
			Fix:         fmt.Sprintf("sign it (notation sign %s@%s) with a key whose certificate chains to the trust store %s, or hold this release", t.Repository, t.Digest, n.TrustStore)}
	}
	return nil
}
