package rollout

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/tend-dev/tend/manifest"
)

// NoWave is the wave of a device that no wave of its rollout takes: the
// selector waves do not match it and its bucket is past the last percent.
const NoWave = -1

// Bucket is where device falls among 100 buckets: the first 8 bytes of
// the SHA-256 of its name, as a big-endian unsigned integer, mod 100. The
// same devices go first in every release.
func Bucket(device string) int {
	sum := sha256.Sum256([]byte(device))
	return int(binary.BigEndian.Uint64(sum[:8]) % 100)
}

// Wave returns the index of device's wave in r and how long after the
// device first saw a release it opens: the first wave whose selector
// matches labels, else the first percent wave whose (cumulative) percent
// exceeds Bucket(device). A rollout without waves is one wave, open at
// once; a device in no wave gets NoWave.
func Wave(device string, labels map[string]string, r *manifest.Rollout) (index int, opensAfter time.Duration) {
	waves := r.Spec.Waves
	if len(waves) == 0 {
		return 0, 0
	}
	for i, w := range waves {
		if w.Selector != nil && w.Selector.Matches(labels) {
			return i, w.After.D()
		}
	}
	b := Bucket(device)
	for i, w := range waves {
		if w.Selector == nil && w.Percent > b {
			return i, w.After.D()
		}
	}
	return NoWave, 0
}
