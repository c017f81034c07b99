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

// Migrate brings the stateDir to this tend's Format, and returns the
// format it found (Format when there was nothing to do). The caller holds
// the stateDir lock, and no older tend runs on the stateDir (an older
// agent reads the files as it wrote them). tend and commit name the tend
// that migrates, for the marker.
//
// A migration first keeps a copy of every file it rewrites, as it was, in
// FormatCopy(from) (built aside and renamed into place whole); then
// rewrites each file atomically (Encode's format; a file already in it is
// left alone, one that does not decode too, for its reader to report);
// and writes the marker last. A crash leaves the marker at the old
// format: the next Migrate keeps the copy it has (the files as they were)
// and rewrites what is left. Until then every file reads in either format.
// DropFormatCopies removes the copy after the first successful tick.
// A stateDir in a newer format is a *NewerError, and nothing is changed.
func (d Dir) Migrate(tend, commit string) (int, error) {
	from, m, err := d.ReadMarker()
	if err != nil {
		return 0, err
	}
	if from > Format {
		return from, &NewerError{Path: d.Format(), Format: from, Tend: m.Tend}
	}
	if from == Format {
		return from, nil
	}
	files, err := d.versioned()
	if err != nil {
		return from, fmt.Errorf("migrate %s from state format %d: %w", string(d), from, err)
	}
	if len(files) > 0 {
		if err := d.keepCopy(from, files); err != nil {
			return from, fmt.Errorf("migrate %s from state format %d: keep a copy in %s: %w", string(d), from, d.FormatCopy(from), err)
		}
		failpoint.Hit("format:copied")
		for _, rel := range files {
			if err := d.upgradeFile(rel); err != nil {
				return from, fmt.Errorf("migrate %s from state format %d: %w", string(d), from, err)
			}
		}
		failpoint.Hit("format:upgraded")
	}
	if err := os.MkdirAll(string(d), Mode); err != nil {
		return from, fmt.Errorf("migrate %s: %w", string(d), err)
	}
	data, err := Encode(FormatFile, Marker{Tend: tend, Commit: commit})
	if err != nil {
		return from, err
	}
	if err := atomicfile.Write(string(d), FormatFile, data, 0o644); err != nil {
		return from, fmt.Errorf("migrate %s: write %s: %w", string(d), FormatFile, err)
	}
	return from, nil
}

// keepCopy copies files (relative to d) into FormatCopy(from), unless a
// complete copy is there from a migration a crash cut short.
func (d Dir) keepCopy(from int, files []string) error {
	dst := d.FormatCopy(from)
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	tmp := d.formatCopyPartial(from)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for _, rel := range files {
		src := d.join(rel)
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(src)
		if err != nil {
			return err
		}
		dir := filepath.Join(tmp, filepath.Dir(rel))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := atomicfile.Write(dir, filepath.Base(rel), data, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return atomicfile.Sync(string(d))
}

// upgradeFile rewrites the file rel in this tend's format, in place and
// atomically, with its mode.
func (d Dir) upgradeFile(rel string) error {
	file := d.join(rel)
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(file)
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
	return nil
}

// DropFormatCopies removes the copies a migration kept (FormatCopy): a
// successful tick has run on the migrated files.
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
