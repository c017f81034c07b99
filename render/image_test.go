package render_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// A container service: its image tag resolves to a digest the replicas
// run by, ${model:…} in a mount becomes the model's link, a path is
// placed under the root, and a tag that moves changes the spec hash (the
// containers are replaced) and the image field (the plan names it).
func TestRenderContainerService(t *testing.T) {
	reg := testoci.Start(t)
	v1 := reg.PushFiles(t, "infer/triton:24.08", map[string][]byte{"bin": []byte("one")})
	reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("w")})
	dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: manifest.DeviceSpec{
		Models: []manifest.Model{{Name: "detector", Ref: reg.Ref("models/detector:v1")}},
		Services: []manifest.Service{{
			Name: "triton", Image: reg.Ref("infer/triton:24.08"), Args: []string{"--model-repository", "/models"},
			Mounts: []manifest.Mount{
				{Source: "${model:detector}", Target: "/models/detector", ReadOnly: true},
				{Source: "/etc/infer/triton", Target: "/etc/triton"},
			},
			Devices: []string{"/dev/nvidia0"},
		}},
	}}
	opts := render.Options{Root: "/srv/node", StateDir: "/var/lib/tend", Resolver: &render.Registry{Options: transport.Options{Insecure: []string{reg.Host}}}}
	d, err := render.Render(context.Background(), dev, "rev1", opts)
	require.NoError(t, err)
	s := d.Specs["service/triton"].(render.Service)
	require.Equal(t, v1, s.ImageDigest)
	require.Equal(t, "24.08", s.ImageTag)
	require.Len(t, s.Replicas, 1)
	r := s.Replicas[0]
	require.Equal(t, reg.Ref("infer/triton")+"@"+v1, r.Image, "the replica runs the digest")
	require.Equal(t, []string{"--model-repository", "/models"}, r.Args)
	require.Equal(t, []manifest.Mount{
		{Source: "/var/lib/tend/models/detector/current", Target: "/models/detector", ReadOnly: true},
		{Source: "/srv/node/etc/infer/triton", Target: "/etc/triton"},
	}, r.Mounts)
	res := resource(t, d, "service/triton")
	require.Equal(t, []string{"model/detector"}, res.Deps)
	require.Equal(t, planner.FieldImage, res.Fields[1].Name)
	require.Equal(t, v1, res.Fields[1].Value)

	v2 := reg.PushFiles(t, "infer/triton:24.08", map[string][]byte{"bin": []byte("two")})
	d2, err := render.Render(context.Background(), dev, "rev1", render.Options{Root: "/srv/node", StateDir: "/var/lib/tend",
		Resolver: &render.Registry{Options: transport.Options{Insecure: []string{reg.Host}}}})
	require.NoError(t, err)
	res2 := resource(t, d2, "service/triton")
	require.Equal(t, v2, res2.Fields[1].Value)
	require.NotEqual(t, res.Fields[0].Value, res2.Fields[0].Value, "a moved tag replaces the containers")

	// Without a registry (CI's default), the image is planned as declared.
	d3, err := render.Render(context.Background(), dev, "rev1", render.Options{})
	require.NoError(t, err)
	require.Equal(t, reg.Ref("infer/triton:24.08"), resource(t, d3, "service/triton").Fields[1].Value)

	// A process service has no image field, and its hash did not change
	// with the container fields' arrival.
	proc := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: manifest.DeviceSpec{
		Services: []manifest.Service{{Name: "web", Command: []string{"/bin/web"}}}}}
	d4, err := render.Render(context.Background(), proc, "rev1", render.Options{})
	require.NoError(t, err)
	fields := resource(t, d4, "service/web").Fields
	require.Equal(t, []string{planner.FieldSpec, planner.FieldReplicas}, []string{fields[0].Name, fields[1].Name})
	require.Equal(t, "sha256:de35aad1a6151bc79084be3c6d851ff5c93e5c73ea785e1639e05796db9b14dd", fields[0].Value)
}

// An image whose registry refuses the tag fails the render, naming the
// service and the image.
func TestRenderContainerImageMissing(t *testing.T) {
	reg := testoci.Start(t)
	dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: manifest.DeviceSpec{
		Services: []manifest.Service{{Name: "triton", Image: reg.Ref("infer/triton:nope")}}}}
	_, err := render.Render(context.Background(), dev, "rev1", render.Options{Resolver: &render.Registry{Options: transport.Options{Insecure: []string{reg.Host}}}})
	require.ErrorContains(t, err, "service/triton: image "+reg.Ref("infer/triton:nope")+": ")
}

func resource(t *testing.T, d *render.Desired, id string) planner.Resource {
	t.Helper()
	for _, r := range d.Resources {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no resource %s", id)
	return planner.Resource{}
}
