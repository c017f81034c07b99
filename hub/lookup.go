package hub

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tend-dev/tend/api"
)

// ErrAmbiguous is a release name that names several releases.
var ErrAmbiguous = errors.New("ambiguous")

// errBadName is a release name that is none of the forms FindRelease
// takes.
var errBadName = errors.New("not a release's name")

// Bounds of a lookup.
const (
	maxNameBytes = api.MaxReleaseKeyBytes
	// maxCandidates bounds the releases a name is matched against, and
	// the digests of a tag; an error lists at most shownCandidates of
	// them.
	maxCandidates   = 100
	shownCandidates = 10
)

var (
	hexRE = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)
	// tagRE is an OCI tag.
	tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// FindRelease resolves name to the key of a release the hub recorded.
// name is one of:
//
//   - a release key (commit:HASH, model/NAME@sha256:HEX+…);
//   - a commit: any unique prefix of its hash (at least 4 hex digits),
//     bare, or as REF@sha1:HASH, sha1:HASH or commit:HASH;
//   - model/NAME@DIGEST or service/NAME@DIGEST, the digest full or a
//     unique prefix (sha256:1f16…);
//   - model/NAME@TAG or service/NAME@TAG: the digests the devices
//     reported resolving that tag to (the releases' resources).
//
// A digest names the release of that digest alone when the hub has one,
// else the one release whose key holds it. A name that matches several
// releases is ErrAmbiguous, its error listing them; one that matches
// none is ErrNotFound, saying what was looked for.
func (s *Store) FindRelease(ctx context.Context, name string) (api.ReleaseKey, error) {
	const forms = "name a release key (commit:HASH, model/NAME@sha256:HEX), a commit (a unique prefix of its hash, or REF@sha1:HASH), or model/NAME@DIGEST|TAG (service/NAME@…)"
	if len(name) > maxNameBytes {
		return "", fmt.Errorf("release name of %d bytes, more than %d: %s: %w", len(name), maxNameBytes, forms, errBadName)
	}
	if k, err := api.ParseReleaseKey(name); err == nil {
		if _, commit := k.Commit(); !commit {
			if ok, err := s.hasRelease(ctx, k); err != nil || ok {
				return k, err
			}
			if strings.Contains(name, "+") {
				return "", fmt.Errorf("release %s: %w: no device reported it", name, ErrNotFound)
			}
		}
	}
	if hash, ok := commitOf(name); ok {
		return s.findCommit(ctx, name, hash)
	}
	id, ref, ok := strings.Cut(name, "@")
	kind, rname, _ := strings.Cut(id, "/")
	if !ok || (kind != "model" && kind != "service") || rname == "" || strings.ContainsAny(id, " \t\n+") {
		return "", fmt.Errorf("release %q: %s: %w", name, forms, errBadName)
	}
	if hex, ok := strings.CutPrefix(ref, "sha256:"); ok {
		if !hexRE.MatchString(hex) {
			return "", fmt.Errorf("release %q: the digest is not sha256: and 4 to 64 hex digits: %w", name, errBadName)
		}
		return s.findDigests(ctx, name, []string{id + "@sha256:" + strings.ToLower(hex)})
	}
	if !tagRE.MatchString(ref) {
		return "", fmt.Errorf("release %q: %q is neither a digest (sha256:HEX) nor a tag: %w", name, ref, errBadName)
	}
	digests, err := s.tagDigests(ctx, id, ref)
	if err != nil {
		return "", err
	}
	if len(digests) == 0 {
		return "", fmt.Errorf("release %s: %w: no device reported resolving %s to a digest (a tend that sends no release resources, v0.1.0, says no tags)", name, ErrNotFound, name)
	}
	prefixes := make([]string, len(digests))
	for i, d := range digests {
		prefixes[i] = id + "@" + d
	}
	return s.findDigests(ctx, name, prefixes)
}

// commitOf reads the hash (prefix) of a commit's name: HASH, sha1:HASH,
// REF@sha1:HASH or commit:HASH.
func commitOf(name string) (string, bool) {
	h := name
	switch {
	case strings.Contains(name, "@sha1:"):
		_, h, _ = strings.Cut(name, "@sha1:")
	case strings.HasPrefix(name, "sha1:"):
		h = strings.TrimPrefix(name, "sha1:")
	case strings.HasPrefix(name, "commit:"):
		h = strings.TrimPrefix(name, "commit:")
	}
	if !hexRE.MatchString(h) {
		return "", false
	}
	return strings.ToLower(h), true
}

func (s *Store) hasRelease(ctx context.Context, k api.ReleaseKey) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM releases WHERE release_key = $1`, string(k)).Scan(&n); err != nil {
		return false, fmt.Errorf("%s: read release %s: %w", s.display, k, err)
	}
	return n > 0, nil
}

// findCommit is the release of the one commit whose hash begins with hash.
func (s *Store) findCommit(ctx context.Context, name, hash string) (api.ReleaseKey, error) {
	keys, err := s.releaseKeys(ctx, `release_key LIKE $1 ESCAPE '\'`, likePrefix("commit:"+hash))
	if err != nil {
		return "", err
	}
	switch len(keys) {
	case 0:
		return "", fmt.Errorf("release %s: %w: no device reported a commit whose hash begins with %s", name, ErrNotFound, hash)
	case 1:
		return keys[0], nil
	}
	return "", ambiguous(name, keys, "give more of the hash")
}

// findDigests is the release named by one of parts, each the prefix of a
// digest's part of a key (ID@sha256:HEX…): the release of that digest
// alone when the hub has one, else the one release whose key holds it.
func (s *Store) findDigests(ctx context.Context, name string, parts []string) (api.ReleaseKey, error) {
	var where []string
	var args []any
	for _, p := range parts {
		args = append(args, likePrefix(p), "%+"+likePrefix(p))
		where = append(where, fmt.Sprintf(`release_key LIKE $%d ESCAPE '\' OR release_key LIKE $%d ESCAPE '\'`, len(args)-1, len(args)))
	}
	keys, err := s.releaseKeys(ctx, strings.Join(where, " OR "), args...)
	if err != nil {
		return "", err
	}
	// The digests named, in full, and the releases of each alone.
	full := map[string]bool{}
	var alone []api.ReleaseKey
	for _, k := range keys {
		for _, kp := range k.Parts() {
			for _, p := range parts {
				if strings.HasPrefix(kp, p) {
					full[kp] = true
					if string(k) == kp {
						alone = append(alone, k)
					}
				}
			}
		}
	}
	switch {
	case len(keys) == 0:
		return "", fmt.Errorf("release %s: %w: no release is keyed by %s: a digest that came with a commit is that commit's release; name the commit", name, ErrNotFound, strings.Join(parts, " or "))
	case len(full) > 1:
		digests := make([]api.ReleaseKey, 0, len(full))
		for p := range full {
			digests = append(digests, api.ReleaseKey(p))
		}
		slices.Sort(digests)
		return "", ambiguous(name, digests, "name one by its digest")
	case len(alone) == 1:
		return alone[0], nil
	case len(keys) == 1:
		return keys[0], nil
	}
	return "", ambiguous(name, keys, "name one by its key")
}

// releaseKeys lists the keys of the releases matching where (SQL over
// release_key), sorted, at most maxCandidates.
func (s *Store) releaseKeys(ctx context.Context, where string, args ...any) ([]api.ReleaseKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT release_key FROM releases WHERE `+where+` ORDER BY release_key LIMIT `+fmt.Sprint(maxCandidates), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: look up releases: %w", s.display, err)
	}
	defer rows.Close()
	var keys []api.ReleaseKey
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("%s: look up releases: %w", s.display, err)
		}
		keys = append(keys, api.ReleaseKey(k))
	}
	return keys, rows.Err()
}

// tagDigests are the digests devices reported resolving resource id's tag
// to (release_tags, see writeTags), sorted, at most maxCandidates.
func (s *Store) tagDigests(ctx context.Context, id, tag string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT digest FROM release_tags WHERE resource_id = $1 AND tag = $2 ORDER BY digest LIMIT `+fmt.Sprint(maxCandidates), id, tag)
	if err != nil {
		return nil, fmt.Errorf("%s: look up tag %s of %s: %w", s.display, tag, id, err)
	}
	defer rows.Close()
	var digests []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("%s: look up tag %s of %s: %w", s.display, tag, id, err)
		}
		digests = append(digests, d)
	}
	return digests, rows.Err()
}

// ambiguous is the error of name matching releases keys.
func ambiguous(name string, keys []api.ReleaseKey, what string) error {
	shown := make([]string, 0, shownCandidates)
	for i, k := range keys {
		if i == shownCandidates {
			shown = append(shown, fmt.Sprintf("and %d more", len(keys)-i))
			break
		}
		shown = append(shown, string(k))
	}
	n := fmt.Sprint(len(keys))
	if len(keys) >= maxCandidates {
		n += " or more"
	}
	return fmt.Errorf("release %s: %w: it names %s releases: %s: %s", name, ErrAmbiguous, n, strings.Join(shown, ", "), what)
}
