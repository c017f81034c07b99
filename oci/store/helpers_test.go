package store

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
)

// Test helpers shared by the store's tests: tar layers, and the names of
// the layouts modelkit reads, spelled out as the tools that push them do.

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarball(t *testing.T, compression string, entries ...entry) *bytes.Buffer {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if e.typ == tar.TypeXGlobalHeader { // as git archive writes one
			h = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": "0123abcd"}}
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	var out bytes.Buffer
	switch compression {
	case extract.Gzip:
		zw := gzip.NewWriter(&out)
		_, _ = zw.Write(raw.Bytes())
		require.NoError(t, zw.Close())
	case extract.Zstd:
		zw, err := zstd.NewWriter(&out)
		require.NoError(t, err)
		_, _ = zw.Write(raw.Bytes())
		require.NoError(t, zw.Close())
	default:
		out = raw
	}
	return &out
}

// Annotations and media types of the layouts modelkit reads.
const (
	annotationTitle          = "org.opencontainers.image.title"
	annotationORASUnpack     = "io.deis.oras.content.unpack"
	annotationFilepath       = "org.cncf.model.filepath"
	mediaTypeKitOpsConfig    = "application/vnd.kitops.modelkit.config.v1+json"
	mediaTypeModelPackConfig = "application/vnd.cncf.model.config.v1+json"
)
