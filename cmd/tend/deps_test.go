package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tend-dev/tend/internal/feature"
	"github.com/tend-dev/tend/internal/testkit/makevar"
)

// omitAll is every build tag of internal/feature: the minimal build.
func omitAll() string {
	var tags []string
	for _, f := range feature.All() {
		tags = append(tags, f.Tag)
	}
	return strings.Join(tags, " ")
}

// buildTags are the Makefile's TAGS, which every build of tend takes
// (make build, make release, make size) beside the omit tags.
func buildTags(t *testing.T) string {
	t.Helper()
	v, err := makevar.Get("TAGS")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deps lists the packages `go list -deps -tags tags` finds cmd/tend
// importing, directly or not, with the Makefile's TAGS.
func deps(t *testing.T, tags string) []string {
	t.Helper()
	tags = strings.TrimSpace(buildTags(t) + " " + tags)
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps -tags %q: %v\n%s", tags, err, ee.Stderr)
		}
		t.Fatalf("go list -deps -tags %q: %v", tags, err)
	}
	return strings.Fields(string(out))
}

// matching returns the packages of pkgs that are pattern or lie under it
// (a pattern ending in "/" matches a prefix).
func matching(pkgs []string, pattern string) []string {
	var out []string
	for _, p := range pkgs {
		if p == pattern || strings.HasPrefix(p, pattern) && (strings.HasSuffix(pattern, "/") || strings.HasPrefix(p, pattern+"/")) {
			out = append(out, p)
		}
	}
	return out
}

// names lists pkgs for a message: the first three, and how many more.
func names(pkgs []string) string {
	if len(pkgs) <= 3 {
		return strings.Join(pkgs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pkgs[:3], ", "), len(pkgs)-3)
}

// neverOnDevice are the packages the device binary must not link, with
// why: what serves the hub or generates files at build time is no part
// of what a device runs.
var neverOnDevice = []struct{ pkg, why string }{
	{"go/parser", "parses Go source: only build-time generators need it (go generate ./schema)"},
	{"github.com/invopop/jsonschema", "generates JSON Schemas: schema embeds the files go generate ./schema writes"},
	{"modernc.org/sqlite", "the hub's database"},
	{"github.com/jackc/pgx/", "the hub's database"},
	{"github.com/tend-dev/tend/hub", "the hub server: tend-hub's, not the device's"},
	{"golang.org/x/net/trace", "grpc's request tracing, which tend never serves: its init renders html/template, and that template executor's method lookup by name makes the linker keep every exported method of every type linked (7 MB, TestMethodsPruned); grpcnotrace in the Makefile's TAGS leaves it out"},
}

// heavy are, per feature, the libraries only it brings in: a build with
// its tag must link none of them (nor the feature's own package).
var heavy = map[string][]string{
	feature.Containers.Name: {"github.com/moby/", "github.com/docker/go-connections/", "github.com/docker/go-units"},
	feature.Notation.Name:   {"github.com/notaryproject/", "oras.land/oras-go/"},
	feature.Cosign.Name:     {"github.com/sigstore/", "github.com/theupdateframework/", "github.com/go-openapi/"},
	feature.MQTT.Name:       {"github.com/eclipse/paho.mqtt.golang", "github.com/gorilla/websocket"},
}

// TestDeviceDeps holds what the device binary links to what it runs: the
// default build links nothing of neverOnDevice; a build with one
// feature's tag links neither that feature's package nor the libraries
// only it brings in, and the default build does (so the test finds what
// it looks for); the minimal build (every tag) links no feature at all.
func TestDeviceDeps(t *testing.T) {
	def := deps(t, "")
	for _, n := range neverOnDevice {
		if found := matching(def, n.pkg); len(found) > 0 {
			t.Errorf("cmd/tend links %s (%s): %s; find the import that brings it in with go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/tend", n.pkg, names(found), n.why)
		}
	}
	all := omitAll()
	minimal := deps(t, all)
	for _, f := range feature.All() {
		t.Run(f.Name, func(t *testing.T) {
			pkgs := append([]string{f.Package}, heavy[f.Name]...)
			omitted := deps(t, f.Tag)
			for _, p := range pkgs {
				if len(matching(def, p)) == 0 {
					t.Errorf("the default build links nothing of %s: is it still what %s brings in? Update heavy", p, f.Name)
				}
				if found := matching(omitted, p); len(found) > 0 {
					t.Errorf("with -tags %s cmd/tend still links %s: a package outside feature_%s.go imports it; reach %s through its registry", f.Tag, names(found), f.Name, f.Name)
				}
				if found := matching(minimal, p); len(found) > 0 {
					t.Errorf("with -tags %q cmd/tend still links %s", all, names(found))
				}
			}
		})
	}
}

// The Makefile's OMIT_TAGS (make build-minimal, make size) are every tag
// of internal/feature.
func TestMakefileOmitTags(t *testing.T) {
	v, err := makevar.Get("OMIT_TAGS")
	if err != nil {
		t.Fatalf("%v: make build-minimal needs it", err)
	}
	if v != omitAll() {
		t.Errorf("Makefile: OMIT_TAGS := %s; internal/feature has %s: list every tag, in its order", v, omitAll())
	}
}

// TestMethodsPruned holds the device binary to what lets the linker drop
// the methods nothing calls: no function linked looks a method up by a
// name known only at run time (reflect's Method, or MethodByName with a
// variable, as text/template's executor does). One such function makes the
// linker keep every exported method of every type linked: 7 MB of the
// 32 MB tend once grpc's request tracing (golang.org/x/net/trace, whose
// init renders html/template) pulled one in. text/template is linked (by
// cobra) but never executed: executing any template in the device binary
// brings the 7 MB back. It links cmd/tend as make build does, with
// -dumpdep, and names the chain of calls that reached the first such
// function.
func TestMethodsPruned(t *testing.T) {
	if testing.Short() {
		t.Skip("links tend: not with -short")
	}
	cmd := exec.Command("go", "build", "-trimpath", "-tags", buildTags(t), "-ldflags=-dumpdep", "-o", os.DevNull, ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%.2000s", err, out)
	}
	chain, err := reflectMethodChain(out)
	if err != nil {
		t.Fatalf("reading go build -ldflags=-dumpdep: %v", err)
	}
	if chain == nil {
		return
	}
	t.Errorf("cmd/tend links a function that looks a method up by name, so the linker keeps every exported method of every type (about 7 MB); drop what calls it:\n\t%s", strings.Join(chain, "\n\t<- "))
}

// reflectMethodChain reads the linker's -dumpdep output ("FROM -> TO"
// for each symbol it marks reachable, in the order it marks them; a
// function that looks methods up by name is flagged <ReflectMethod>) and
// returns the first such function and what reached it, back to the entry
// point; nil if there is none. The first one is a cause: the methods the
// linker keeps because of it are marked after it.
func reflectMethodChain(dump []byte) ([]string, error) {
	const flag = " <ReflectMethod>"
	strip := func(s string) string {
		for {
			i := strings.LastIndex(s, " <")
			if i < 0 || !strings.HasSuffix(s, ">") {
				return s
			}
			s = s[:i]
		}
	}
	parent := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		name := strip(to)
		if _, seen := parent[name]; !seen {
			parent[name] = strip(from)
		}
		if !strings.Contains(to, flag) {
			continue
		}
		var chain []string
		for n := name; n != "" && n != "_" && len(chain) < 64; n = parent[n] {
			chain = append(chain, n)
		}
		return chain, nil
	}
	return nil, sc.Err()
}
