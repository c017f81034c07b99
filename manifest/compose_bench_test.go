package manifest

import (
	"fmt"
	"testing"
)

// fleetInputs is a repo of n Device documents (one file each, labelled
// with a site and hardware) and p profiles selecting by those labels.
func fleetInputs(n, p int) []Input {
	inputs := make([]Input, 0, n+p)
	for i := range p {
		inputs = append(inputs, Input{Name: fmt.Sprintf("profiles/p%03d.yaml", i), Data: fmt.Appendf(nil, `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: p%03d}
spec:
  selector: {matchLabels: {site: s%d}}
  priority: %d
  vars: {threshold: "0.%d"}
  files:
    - {path: /etc/infer/p%03d.yaml, content: "threshold: ${var:threshold} on ${device}"}
`, i, i%10, i, i%10, i)})
	}
	for i := range n {
		inputs = append(inputs, Input{Name: fmt.Sprintf("devices/cam-%05d/device.yaml", i), Data: fmt.Appendf(nil, `apiVersion: tend.dev/v1alpha1
kind: Device
metadata:
  name: cam-%05d
  labels: {site: s%d, hw: orin}
spec:
  files:
    - {path: /etc/infer/own.yaml, content: "cam %d"}
`, i, i%10, i)})
	}
	return inputs
}

// BenchmarkComposeOneDevice composes one device from a repo of 1,000 and
// 10,000 Device documents with 100 profiles, as the agent does each time
// the commit moves: per document, not per device.
func BenchmarkComposeOneDevice(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		inputs := fleetInputs(n, 100)
		opts := ComposeOptions{Device: "cam-00042", Labels: map[string]string{"room": "3"},
			ValidateOptions: ValidateOptions{AllowPaths: []string{"/etc/infer"}, CheckAllowPaths: true}}
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			for b.Loop() {
				c, err := Compose(inputs, opts)
				if err != nil {
					b.Fatal(err)
				}
				if len(c.Layers) != 11 {
					b.Fatalf("%d layers, want 10 profiles and the device", len(c.Layers))
				}
			}
		})
	}
}

// A file is skipped unparsed only when it cannot hold this device's
// document nor a profile: a name written with an escape is still found.
func TestComposeSkipsOnlyOtherDevicesFiles(t *testing.T) {
	inputs := []Input{
		{Name: "devices/cam-2.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-2}\nspec: {files: [{path: /etc/infer/a, content: [broken}\n")},
		{Name: "devices/escaped.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: \"cam\\x2d1\"}\nspec: {files: [{path: /etc/infer/a, content: a}]}\n")},
	}
	c, err := Compose(inputs, ComposeOptions{Device: "cam-1"})
	if err != nil {
		t.Fatalf("another device's broken file broke this one: %v", err)
	}
	if len(c.Device.Spec.Files) != 1 {
		t.Fatalf("the document naming cam-1 with an escape was not read: %+v", c.Device.Spec)
	}
}
