package validate

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// A problem that several devices share is written once, naming them all;
// one of a device alone, under that device.
func TestWriteFindingsOncePerProblem(t *testing.T) {
	shared := &manifest.Error{File: "profiles/site-b.yaml", Line: 7, Field: "spec.files[0].content", Msg: "${var:camera} is set by no layer"}
	own := &manifest.Error{File: "devices/cam-3/device.yaml", Line: 4, Field: "spec.files[0].content", Msg: "${var:cameras} is set by no layer"}
	var b strings.Builder
	writeFindings(&b, "invalid", []finding{
		{Kind: "device", Subject: "cam-2", Err: manifest.Errors{shared}},
		{Kind: "device", Subject: "cam-3", Err: manifest.Errors{shared, own}},
		{Subject: "rollout/default", Err: errors.New("no wave takes a device")},
		{Kind: "device", Subject: "cam-1"},
	})
	require.Equal(t, "invalid: devices cam-2, cam-3:\n  "+shared.Error()+"\n"+
		"invalid: device cam-3:\n  "+own.Error()+"\n"+
		"invalid: rollout/default:\n  no wave takes a device\n", b.String())
}

func TestReach(t *testing.T) {
	many := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	for _, tc := range []struct {
		name    string
		devices []string
		invalid map[string]bool
		want    string
	}{
		{"none", nil, nil, "applies to no device with a Device document in Git (it may still match devices known only by their agent config labels)"},
		{"valid", []string{"cam-1", "cam-2"}, nil, "applies to 2 devices: cam-1, cam-2"},
		{"one invalid", []string{"cam-1"}, map[string]bool{"cam-1": true}, "applies to 1 device: cam-1 (invalid)"},
		{"all invalid", []string{"cam-1", "cam-2"}, map[string]bool{"cam-1": true, "cam-2": true}, "applies to 2 devices: cam-1, cam-2 (all invalid)"},
		{"some invalid", []string{"cam-1", "cam-2"}, map[string]bool{"cam-2": true}, "applies to 2 devices: cam-1, cam-2 (1 of them invalid)"},
		{"capped", many, nil, "applies to 12 devices: a, b, c, d, e, f, g, h, i, j, … and 2 more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, reach("applies to", tc.devices, inGit, tc.invalid))
		})
	}
}

// A problem lies in a profile's document when it is in its file, at or
// after its first line and before the next document's.
func TestInDocument(t *testing.T) {
	starts := map[string][]int{"p.yaml": {1, 10}}
	at := func(file string, line int) *manifest.Error { return &manifest.Error{File: file, Line: line} }
	require.True(t, inDocument(at("p.yaml", 3), "p.yaml", 1, starts))
	require.False(t, inDocument(at("p.yaml", 12), "p.yaml", 1, starts), "the next document's")
	require.True(t, inDocument(at("p.yaml", 12), "p.yaml", 10, starts))
	require.False(t, inDocument(at("q.yaml", 3), "p.yaml", 1, starts), "another file")
}
