package manifest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// FuzzLoad decodes arbitrary bytes as a device's manifest file. Every
// input either loads or fails with an error matching ErrInvalid that
// names the file; nothing panics. What loads and validates holds only
// clean, absolute, printable paths under the allowed ones.
func FuzzLoad(f *testing.F) {
	header := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"
	for _, s := range []string{
		header + "  files:\n    - {path: /etc/infer/a, content: x, mode: \"0600\"}\n",
		header + "  models:\n    - {name: m, ref: r.local/m:v1, path: /opt/models/m}\n",
		header + "  services:\n    - {name: s, command: [\"${model:m}/x\"], restartOn: [\"file:/etc/infer/a\"], health: {tcp: \"127.0.0.1:1\", startupGrace: 1s}}\n",
		header + "  files: [\n",
		"---\n" + header + "---\nkind: Device\n",
		header + "  files:\n    - {path: \"/etc/infer/a\\nb\", content: x}\n",
		"&a [*a, *a]\n",
	} {
		f.Add([]byte(s))
	}
	allow := ValidateOptions{AllowPaths: []string{"/etc/infer", "/opt/models"}, CheckAllowPaths: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Load("cam-017", []Input{{Name: "devices/cam-017/d.yaml", Data: data}})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), "d.yaml") && !strings.Contains(err.Error(), "cam-017") {
				t.Fatalf("error names neither the file nor the device: %v", err)
			}
			return
		}
		if err := d.Validate(allow); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("validation error does not match ErrInvalid: %v", err)
			}
			return
		}
		for _, p := range declaredPaths(d) {
			if !Allowed(p, allow.AllowPaths) || strings.ContainsFunc(p, unicode.IsControl) {
				t.Fatalf("valid device declares path %q", p)
			}
		}
	})
}

// declaredPaths are the paths a device writes.
func declaredPaths(d *Device) []string {
	var out []string
	for _, f := range d.Spec.Files {
		out = append(out, f.Path)
	}
	for _, m := range d.Spec.Models {
		if m.Path != "" {
			out = append(out, m.Path)
		}
	}
	return out
}

// FuzzExpand composes a profile whose variables and file content are
// arbitrary strings: expansion never panics, an error names a file, and
// what composes keeps every expanded string within MaxExpandedBytes and
// the device within MaxExpandedDeviceBytes, however the variables refer to
// one another.
func FuzzExpand(f *testing.F) {
	for _, s := range [][3]string{
		{"x", "${var:a}${var:a}", "${var:b}${var:b}${var:b}"},
		{"${var:c}", "${var:a}", "${var:b}"},
		{"$${var:a}", "${device}-${label:site}", "${var:nope}"},
		{strings.Repeat("z", 4096), "${var:a}${var:a}${var:a}${var:a}", "${var:b}${var:b}${var:b}${var:b}"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		quote := func(s string) string { return strconv.Quote(s) }
		doc := "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec:\n  selector: {}\n" +
			"  vars: {a: " + quote(a) + ", b: " + quote(b) + ", c: " + quote(c) + "}\n" +
			"  files:\n    - {path: /etc/infer/x, content: \"${var:c}${var:c}\"}\n"
		comp, err := Compose([]Input{{Name: "p.yaml", Data: []byte(doc)}},
			ComposeOptions{Device: "cam-017", Labels: map[string]string{"site": "lab"}, ValidateOptions: allow})
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "p.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, f := range comp.Device.Spec.Files {
			if len(f.Content) > MaxExpandedBytes {
				t.Fatalf("%s expanded to %d bytes", f.Path, len(f.Content))
			}
		}
	})
}

// FuzzAliases loads a service whose command repeats an anchored string
// through aliases, of any size and count: what loads holds at most
// maxExpansion(file size) bytes of arguments, and what does not is refused
// with an error that names the file; aliases never take memory the file's
// size does not allow.
func FuzzAliases(f *testing.F) {
	f.Add("x", uint16(3))
	f.Add(strings.Repeat("y", 5000), uint16(60))
	f.Add("", uint16(1000))
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  services:\n" +
			"  - name: s\n    command: [&a " + strconv.Quote(s) + strings.Repeat(", *a", int(n)) + "]\n"
		d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(doc)}})
		if err != nil {
			if !strings.Contains(err.Error(), "d.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		total := 0
		for _, arg := range d.Spec.Services[0].Command {
			total += len(arg)
		}
		if total > maxExpansion(len(doc)) {
			t.Fatalf("%d bytes of arguments from a file of %d", total, len(doc))
		}
	})
}
