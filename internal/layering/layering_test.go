package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/tend-dev/tend/"

// Ranks of DESIGN.md's flow: a package imports packages of its own rank
// or a lower one. The vocabulary (manifest's documents, planner's plan
// types, both pure) and the helpers under internal/ sit below every stage.
var ranks = map[string]int{
	"internal/atomicfile": 0, "internal/backoff": 0, "internal/confine": 0,
	"internal/errkind": 0, "internal/failpoint": 0, "internal/feature": 0, "internal/flock": 0, "internal/layering": 0, "internal/printable": 0, "internal/reserve": 0, "internal/statedir": 0,
	"internal/buildinfo": 0, "internal/logging": 0, "internal/tokenfile": 0,
	"manifest": 0, "planner": 0, "api": 0,

	// "oci" ranks every package under it; ociOrder orders them.
	"source": 1, "gitsource": 1, "ocisource": 1, "oci": 1, "notify": 1, "schema": 1,
	"render": 2, "config": 2,
	"rollout": 3,
	"applier": 4, "drift": 4, "gating": 4,
	"agent": 5, "diff": 5, "hub": 5, "hubclient": 5,
	"cmd/tend": 6, "cmd/tend-hub": 6,
	// The release's tooling (make release): beside the binary, in no stage.
	"internal/release": 6,
}

// Prefixes of packages outside the ranks: test support may import
// anything (production code may not import it), and the example programs
// of make demo stand beside the product.
const (
	testkit  = "internal/testkit/"
	examples = "examples/"
)

// nodeOnly are the packages that act on a node; ciOnly, those the CI
// commands (validate, render, diff, schema, publish, notify) are built
// from, which must not reach the node's (CI has no node, and they build
// for every platform).
var (
	nodeOnly = []string{"applier", "agent", "drift", "gating"}
	ciOnly   = []string{"manifest", "render", "diff", "schema", "source", "gitsource", "ocisource", "notify", "rollout", "planner", "config", "cmd/tend-hub"}
)

// wire is the package of the types a device and the hub exchange: it
// imports nothing of the module (and only the standard library, see
// TestWireIsStandardLibraryOnly), so that each side links it and not the
// other. hubSide are the hub's packages and its client's: they reach no
// node's package, and the client not the hub (tend fleet runs on a
// device, without the hub's SQL drivers).
const wire = "api"

var hubSide = []string{"hub", "hubclient"}

// ociOrder is the order of the oci packages (all of rank 1): each imports
// only those before it, so none reaches back into one that imports it.
// The registry comes first, then unpacking, then reading an artifact's
// manifests, then the store that keeps and builds what they describe;
// the signature checks stand beside them, on the registry alone.
var ociOrder = []string{"oci/transport", "oci/extract", "oci/modelkit", "oci/store", "oci/verify"}

// ociPlace is the place in ociOrder of pkg (relative to the module), or
// of the package it is under (oci/verify/cosign is oci/verify's); false
// for a package outside oci, and -1 for one under oci with no place.
func ociPlace(pkg string) (int, bool) {
	if !under(pkg, "oci") {
		return 0, false
	}
	for i, o := range ociOrder {
		if under(pkg, o) {
			return i, true
		}
	}
	return -1, true
}

// rank is the rank of pkg (relative to the module), or of the package it
// is under (applier/model is the applier's).
func rank(pkg string) (int, bool) {
	for p := pkg; ; {
		if r, ok := ranks[p]; ok {
			return r, true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return 0, false
		}
		p = p[:i]
	}
}

func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

// check returns one line per broken rule of graph (package → the module's
// packages it imports, all relative to the module).
func check(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		if strings.HasPrefix(pkg, testkit) || strings.HasPrefix(pkg, examples) {
			continue
		}
		from, ok := rank(pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no rank: add it to ranks in internal/layering where DESIGN.md's flow puts it", pkg))
			continue
		}
		place, inOCI := ociPlace(pkg)
		if inOCI && place < 0 {
			bad = append(bad, fmt.Sprintf("%s has no place among the oci packages: add it to ociOrder in internal/layering", pkg))
		}
		for _, imp := range imports {
			if strings.HasPrefix(imp, testkit) {
				bad = append(bad, fmt.Sprintf("%s imports the test helper %s: production code must not", pkg, imp))
				continue
			}
			if pkg == "applier" && imp != "applier" && under(imp, "applier") {
				bad = append(bad, fmt.Sprintf("applier imports its driver %s: the orchestrator is handed its drivers", imp))
			}
			to, ok := rank(imp)
			if ok && to > from {
				bad = append(bad, fmt.Sprintf("%s (rank %d) imports the later stage %s (rank %d)", pkg, from, imp, to))
			}
			if to, ok := ociPlace(imp); inOCI && place >= 0 && ok && to > place {
				bad = append(bad, fmt.Sprintf("%s imports %s, a later oci package: each imports only those before it (%s)", pkg, imp, strings.Join(ociOrder, ", ")))
			}
			if pkg == wire {
				bad = append(bad, fmt.Sprintf("%s, the wire types, imports %s: it imports the standard library only", pkg, imp))
			}
			for _, h := range hubSide {
				for _, node := range nodeOnly {
					if pkg == h && under(imp, node) {
						bad = append(bad, fmt.Sprintf("%s imports %s, which acts on a node: take the wire types from %s", pkg, imp, wire))
					}
				}
			}
			if pkg == "hubclient" && under(imp, "hub") {
				bad = append(bad, fmt.Sprintf("hubclient imports %s: it reads the hub over HTTP, with the types of %s", imp, wire))
			}
			for _, ci := range ciOnly {
				for _, node := range nodeOnly {
					if under(pkg, ci) && under(imp, node) {
						bad = append(bad, fmt.Sprintf("%s, a package of the CI commands, imports %s, which acts on a node", pkg, imp))
					}
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// graph lists the module's packages and what each imports of the module,
// test files left out, from go list.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkg := strings.TrimPrefix(p.ImportPath, module)
		g[pkg] = nil
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				g[pkg] = append(g[pkg], rel)
			}
		}
	}
	return g
}

func TestImportsFollowTheFlow(t *testing.T) {
	g := graph(t)
	if _, ok := g["cmd/tend"]; !ok || len(g) < 20 {
		t.Fatalf("go list found %d packages, without cmd/tend: not the module", len(g))
	}
	for _, line := range check(g) {
		t.Error(line)
	}
}

// TestCheckFindsBrokenRules feeds check a graph with each rule broken
// once, so the test above cannot pass by checking nothing.
func TestCheckFindsBrokenRules(t *testing.T) {
	got := check(map[string][]string{
		"render":               {"manifest", "planner", "applier/model"},
		"gitsource":            {"internal/testkit/testgit"},
		"applier":              {"planner", "applier/file"},
		"rollout":              {"render", "manifest"},
		"cmd/tend":             {"agent", "diff", "source"},
		"internal/testkit/foo": {"agent"},
		"examples/registry":    {"internal/testkit/testoci"},
		"newstage":             {"manifest"},
		"api":                  {"manifest"},
		"hub":                  {"api", "agent/status"},
		"hubclient":            {"api", "hub"},
		"oci/transport":        {"internal/printable", "oci/store"},
		"oci/modelkit":         {"oci/transport", "oci/extract"},
		"oci/verify/cosign":    {"oci/verify", "oci/transport"},
		"oci/blobs":            {"oci/transport"},
	})
	want := []string{
		"api, the wire types, imports manifest: it imports the standard library only",
		"applier imports its driver applier/file: the orchestrator is handed its drivers",
		"gitsource imports the test helper internal/testkit/testgit: production code must not",
		"hub imports agent/status, which acts on a node: take the wire types from api",
		"hubclient imports hub: it reads the hub over HTTP, with the types of api",
		"newstage has no rank: add it to ranks in internal/layering where DESIGN.md's flow puts it",
		"oci/blobs has no place among the oci packages: add it to ociOrder in internal/layering",
		"oci/transport imports oci/store, a later oci package: each imports only those before it (oci/transport, oci/extract, oci/modelkit, oci/store, oci/verify)",
		"render (rank 2) imports the later stage applier/model (rank 4)",
		"render, a package of the CI commands, imports applier/model, which acts on a node",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWireIsStandardLibraryOnly: the wire types link nothing but the
// standard library, whoever imports them.
func TestWireIsStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+wire).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	if deps := strings.Fields(string(out)); len(deps) != 1 || deps[0] != module+wire {
		t.Errorf("%s links %s: it must link the standard library only", module+wire, strings.Join(deps, ", "))
	}
}
