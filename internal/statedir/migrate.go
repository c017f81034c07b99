package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
)

// Migration is what Migrate did.
type Migration struct {
	From int    // the format the stateDir was in; Format when there was nothing to do
	Copy string // the folder of the copy of the files as they were; "" when none was kept (a new stateDir)
}

// Migrate brings the stateDir to this tend's Format. The caller holds the
// stateDir lock and the agent lock (no older agent reads the files while
// they change). tend and commit name the tend that migrates, for the
// marker.
//
// A migration first keeps a copy of every file it rewrites, as it was, in
// FormatCopy(from) (built aside, synced, and renamed into place whole);
// then rewrites each file atomically (a file already in this format is
// left alone, one that does not decode too, for its reader to report);
// and writes the marker last. A crash leaves the marker at the old
// format: the next Migrate keeps the copy it finds once any file was
// rewritten (it holds the files as they were), builds it again while none
// was, and rewrites what is left. Until then every file reads in either
// format. DropFormatCopies removes the copy after the first successful
// apply; RestoreFormatCopy puts it back. A stateDir in a newer format, or
// holding any file in one, is a *NewerError, and nothing is changed.
func (d Dir) Migrate(tend, commit string) (Migration, error) {
	from, m, err := d.ReadMarker()
	if err != nil {
		return Migration{}, err
	}
	if from > Format {
		return Migration{From: from}, &NewerError{Path: d.Format(), Format: from, Tend: m.Tend, Commit: m.Commit}
	}
	if from == Format {
		return Migration{From: from}, nil
	}
	files, err := d.versioned()
	if err != nil {
		return Migration{From: from}, fmt.Errorf("migrate %s from state format %d: %w", string(d), from, err)
	}
	upgraded := false
	for _, rel := range files {
		n, err := d.fileFormat(rel)
		if err != nil {
			continue // gone, or undecodable: its reader says so
		}
		if n > Format {
			return Migration{From: from}, &NewerError{Path: d.join(rel), Format: n}
		}
		upgraded = upgraded || n > from
	}
	mig := Migration{From: from}
	if len(files) > 0 {
		mig.Copy = d.FormatCopy(from)
		if err := d.keepCopy(from, files, upgraded); err != nil {
			return mig, fmt.Errorf("migrate %s from state format %d: keep a copy in %s: %w", string(d), from, mig.Copy, err)
		}
		failpoint.Hit("format:copied")
		for _, rel := range files {
			if err := d.upgradeFile(rel); err != nil {
				return mig, fmt.Errorf("migrate %s from state format %d: %w", string(d), from, err)
			}
		}
		failpoint.Hit("format:upgraded")
	}
	if err := os.MkdirAll(string(d), Mode); err != nil {
		return mig, fmt.Errorf("migrate %s: %w", string(d), err)
	}
	data, err := Encode(FormatFile, Marker{Tend: tend, Commit: commit})
	if err != nil {
		return mig, err
	}
	if err := atomicfile.Write(string(d), FormatFile, data, 0o644); err != nil {
		return mig, fmt.Errorf("migrate %s: write %s: %w", string(d), FormatFile, err)
	}
	return mig, nil
}

// fileFormat is the format of the file rel.
func (d Dir) fileFormat(rel string) (int, error) {
	data, err := os.ReadFile(d.join(rel))
	if err != nil {
		return 0, err
	}
	return formatOf(filepath.Base(rel), data)
}

// keepCopy copies files (relative to d) into FormatCopy(from), with the
// modes and owners of the files and of their folders. A copy already
// there is kept when upgraded (a migration a crash cut short rewrote some
// files: the copy holds them as they were); otherwise it is left from an
// earlier migration or restore and is built again.
func (d Dir) keepCopy(from int, files []string, upgraded bool) error {
	dst := d.FormatCopy(from)
	if _, err := os.Lstat(dst); err == nil {
		if upgraded {
			return nil
		}
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	tmp := d.formatCopyPartial(from)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	dirs := map[string]bool{tmp: true}
	for _, rel := range append(files, FormatFile) {
		src := d.join(rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since it was listed (tend resume removes suspended without the lock)
		}
		if err != nil {
			return err
		}
		data, err := os.ReadFile(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		// Each folder on the way as the original is.
		parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
		for i := range parts {
			if parts[i] == "." {
				break
			}
			sub := filepath.Join(parts[:i+1]...)
			at := filepath.Join(tmp, sub)
			if dirs[at] {
				continue
			}
			orig, err := os.Lstat(d.join(sub))
			if err != nil {
				return err
			}
			if err := os.Mkdir(at, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := sameMode(at, orig); err != nil {
				return err
			}
			dirs[at] = true
		}
		dir := filepath.Join(tmp, filepath.Dir(rel))
		if err := atomicfile.Write(dir, filepath.Base(rel), data, fi.Mode().Perm()); err != nil {
			return err
		}
		if err := sameOwner(filepath.Join(dir, filepath.Base(rel)), fi); err != nil {
			return err
		}
	}
	// Every folder synced, so that the rename publishes a whole copy.
	for dir := range dirs {
		if err := atomicfile.Sync(dir); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return atomicfile.Sync(string(d))
}

// sameMode gives the folder at the mode of the folder orig.
func sameMode(at string, orig fs.FileInfo) error {
	if err := os.Chmod(at, orig.Mode().Perm()); err != nil {
		return err
	}
	return sameOwner(at, orig)
}

// upgradeFile rewrites the file rel in this tend's format, in place and
// atomically, with its mode and owner. A file gone since it was listed is
// no error.
func (d Dir) upgradeFile(rel string) error {
	file := d.join(rel)
	fi, err := os.Lstat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	name := filepath.Base(file)
	n, err := formatOf(name, data)
	if err != nil || n >= Format {
		return nil // undecodable: its reader says so, with what to do
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil
	}
	up, err := upgrade(name, compact.Bytes(), n)
	if err != nil {
		return nil
	}
	out, err := indent(up)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Dir(file), name, out, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("rewrite %s: %w", file, err)
	}
	return sameOwner(file, fi)
}

// DropFormatCopies removes the copies a migration kept (FormatCopy): an
// apply has succeeded on the migrated files.
func (d Dir) DropFormatCopies() error {
	var errs []error
	for n := 1; n < Format; n++ {
		for _, p := range []string{d.FormatCopy(n), d.formatCopyPartial(n)} {
			if _, err := os.Lstat(p); err == nil {
				errs = append(errs, os.RemoveAll(p))
			}
		}
	}
	return errors.Join(errs...)
}

// versioned lists the files of d that carry a format version, relative
// to d: the JSON files tend reads back. status.json is not one of them:
// it holds the status document, which has a formatVersion of its own
// (the document's, served on /status and sent in reports).
func (d Dir) versioned() ([]string, error) {
	var out []string
	add := func(rel string) error {
		fi, err := os.Lstat(d.join(rel))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			out = append(out, rel)
		}
		return nil
	}
	// each calls f with the names of the folders in d's folder rel.
	each := func(rel string, f func(name string) error) error {
		entries, err := os.ReadDir(d.join(rel))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				if err := f(e.Name()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, f := range []string{InventoryFile, QuarantineFile, VerdictFile, ReleasesFile, ReportFile, SuspendFile} {
		if err := add(f); err != nil {
			return nil, err
		}
	}
	if err := each(ociDir, func(name string) error {
		if strings.HasPrefix(name, ArtifactTempPrefix) {
			return nil
		}
		return add(filepath.Join(ociDir, name, ArtifactFile))
	}); err != nil {
		return nil, err
	}
	trees := filepath.Join(blobsDir, treesDir)
	if err := each(trees, func(alg string) error {
		if alg == partialDir {
			return nil
		}
		return each(filepath.Join(trees, alg), func(hex string) error {
			return add(filepath.Join(trees, alg, hex, TreeRecordFile))
		})
	}); err != nil {
		return nil, err
	}
	if err := add(filepath.Join(modelsDir, RefusedFile)); err != nil {
		return nil, err
	}
	if err := each(modelsDir, func(name string) error {
		if strings.HasPrefix(name, TrashPrefix) {
			return nil
		}
		return add(filepath.Join(modelsDir, name, ModelRecordFile))
	}); err != nil {
		return nil, err
	}
	if err := add(filepath.Join(servicesDir, ImagesFile)); err != nil {
		return nil, err
	}
	if err := each(servicesDir, func(name string) error {
		if err := add(filepath.Join(servicesDir, name, ServiceFile)); err != nil {
			return err
		}
		entries, err := os.ReadDir(d.join(servicesDir, name))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if _, ok := InstanceReplica(e.Name()); ok {
				if err := add(filepath.Join(servicesDir, name, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}
