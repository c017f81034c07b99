package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The documents of testdata were written by the types as they were before
// they moved here (the status document from agent/status, the answers
// from hub), with every field set. Each decodes whole into its type here
// and encodes back byte for byte, as the agent and the hub write them
// (two spaces of indent): the move changed no byte of the wire.
func TestWireFormatUnchanged(t *testing.T) {
	for _, tc := range []struct {
		file string
		v    any
	}{
		{"status.json", &Status{}},
		{"devices.json", &DeviceList{}},
		{"device.json", &DeviceDetail{}},
		{"releases.json", &ReleaseList{}},
		{"release.json", &ReleaseDetail{}},
		{"verdict.json", &Verdict{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(tc.v), "a field of testdata/%s is not in the type", tc.file)
			for _, path := range unset(reflect.ValueOf(tc.v).Elem(), reflect.TypeOf(tc.v).Elem().Name()) {
				t.Errorf("testdata/%s leaves %s unset: set it, so that the round trip covers it", tc.file, path)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(tc.v))
			require.Equal(t, string(want), got.String())
		})
	}

	t.Run("a device's status is a status document", func(t *testing.T) {
		var dd DeviceDetail
		var st, want Status
		b, err := os.ReadFile(filepath.Join("testdata", "device.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &dd))
		require.NoError(t, json.Unmarshal(dd.Status, &st))
		b, err = os.ReadFile(filepath.Join("testdata", "status.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &want))
		require.Equal(t, want, st)
	})
}

// unset lists the fields of v (named from path) left at their zero value:
// every field of a struct, the first element of a list, the struct a
// pointer points to (a pointer to 0 is set: it says 0, not absent).
func unset(v reflect.Value, path string) []string {
	if v.IsZero() {
		return []string{path}
	}
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		if v.Elem().Kind() == reflect.Struct {
			out = unset(v.Elem(), path)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Type().Elem().Kind() != reflect.Uint8 { // raw JSON: set is enough
			out = unset(v.Index(0), path+"[0]")
		}
	case reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return nil
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out = append(out, unset(v.Field(i), path+"."+f.Name)...)
			}
		}
	}
	return out
}
