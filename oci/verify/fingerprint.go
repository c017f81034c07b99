package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fingerprintSettle is how long ago a file must have been modified for
// its size and modification time to stand for its content. A file
// written again within one tick of the file system's clock keeps its
// time (git's "racy" files): one modified later than this before it was
// read is read again at each verification until it is older.
const fingerprintSettle = 2 * time.Second

// memo is a requirement's fingerprint, with the stamp (the sizes and
// modification times of its files) it was made at.
type memo struct{ stamp, fp string }

// boundedFile is a file a requirement names, with the bound and the
// name it is read under.
type boundedFile struct {
	path string
	max  int64
	what string
}

// id names q's block and its fields.
func (q requirement) id() string {
	if q.notation != nil {
		b, _ := json.Marshal(q.notation)
		return "notation " + string(b)
	}
	b, _ := json.Marshal(q.cosign)
	return "cosign " + string(b)
}

// files are the files whose content q's fingerprint covers.
func (q requirement) files() []boundedFile {
	if q.notation != nil {
		return []boundedFile{{q.notation.TrustPolicy, MaxTrustPolicyFile, "Notation trust policy"}}
	}
	var out []boundedFile
	for _, path := range q.cosign.Keys {
		out = append(out, boundedFile{path, MaxKeyFile, "cosign public key"})
	}
	if q.cosign.TrustedRoot != "" {
		out = append(out, boundedFile{q.cosign.TrustedRoot, MaxTrustedRootFile, "Sigstore trusted root"})
	}
	return out
}

// listing is what q's fingerprint covers of a folder: the names, sizes
// and times of the entries of a notation block's trust store; "" for a
// cosign block.
func (q requirement) listing() (string, error) {
	if q.notation == nil {
		return "", nil
	}
	var b strings.Builder
	count := 0
	err := filepath.WalkDir(q.notation.TrustStore, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if count++; count > MaxTrustStoreFiles {
			return fmt.Errorf("more than %d entries", MaxTrustStoreFiles)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read Notation trust store %s: %w", q.notation.TrustStore, err)
	}
	return b.String(), nil
}

// stamp is the paths, sizes and modification times of files, as a stat
// finds them at now. ok is false when one cannot be stat'd; settled
// when each was modified fingerprintSettle or more before now.
func stamp(files []boundedFile, now time.Time) (s string, settled, ok bool) {
	var b strings.Builder
	settled = true
	for _, f := range files {
		info, err := os.Stat(f.path)
		if err != nil {
			return "", false, false
		}
		fmt.Fprintf(&b, "%s %d %d\n", f.path, info.Size(), info.ModTime().UnixNano())
		if now.Sub(info.ModTime()) < fingerprintSettle {
			settled = false
		}
	}
	return b.String(), settled, true
}

// fingerprint names q: its fields, the content of its files and the
// listing of its trust store. The Verifier remembers it by the stamp of
// the files and reads them again only when the stamp changed (or a file
// had not settled when last read): a verification under an unchanged
// verify block stats its files and reads none.
func (v *Verifier) fingerprint(q requirement) (string, error) {
	id := q.id()
	files := q.files()
	st, settled, ok := stamp(files, time.Now())
	var listing string
	var err error
	if ok {
		if listing, err = q.listing(); err != nil {
			return "", err
		}
		st += listing
		v.mu.Lock()
		m, found := v.fingerprints[id]
		v.mu.Unlock()
		if found && m.stamp == st {
			return m.fp, nil
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", id)
	for _, f := range files {
		// A file that could not be stat'd fails here, said before the
		// trust store is listed.
		b, err := ReadFile(f.path, f.max, f.what)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%d\n", len(b))
		h.Write(b)
	}
	if !ok {
		if listing, err = q.listing(); err != nil {
			return "", err
		}
	}
	h.Write([]byte(listing))
	fp := hex.EncodeToString(h.Sum(nil))
	if ok && settled {
		v.mu.Lock()
		if v.fingerprints == nil || len(v.fingerprints) >= maxRemembered {
			v.fingerprints = map[string]memo{}
		}
		v.fingerprints[id] = memo{stamp: st, fp: fp}
		v.mu.Unlock()
	}
	return fp, nil
}
