package store

import (
	"context"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/transport"
)

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, CheckSpace(dir, "model detector", 1024))
	err := CheckSpace(dir, "model detector", 1<<62)
	require.ErrorIs(t, err, ErrNoSpace)
	require.Regexp(t, `^not enough disk space: model detector needs 4\.6 EB, [0-9.]+ [kMGTPE]?B free on `+dir+`$`, err.Error())
}

func TestFetchAllInParallel(t *testing.T) {
	f := newFlakyRegistry(t)
	repo, _, _ := f.pushLayer(t)
	var descs []v1.Descriptor
	var want int64
	for range 4 {
		l, err := random.Layer(64<<10, "application/octet-stream")
		require.NoError(t, err)
		require.NoError(t, remoteWriteLayer(repo, l))
		d, _ := l.Digest()
		size, _ := l.Size()
		descs = append(descs, v1.Descriptor{Digest: d, Size: size})
		want += size
	}
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	n, err := s.FetchAll(context.Background(), repo, descs, 2, transport.Options{})
	require.NoError(t, err)
	require.Equal(t, want, n)
	for _, d := range descs {
		require.True(t, s.Has(d.Digest))
	}
}
