package manifest

import (
	"fmt"
	"math"
	"strconv"
)

var (
	memoryQuantity = lazyRegexp(`^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$`)
	cpuQuantity    = lazyRegexp(`^([0-9]+(?:\.[0-9]+)?)(m?)$`)
	memoryUnits    = map[string]float64{
		"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
	}
)

// ParseMemory parses a memory quantity ("512Mi", "1G", "1048576") into bytes.
func ParseMemory(s string) (int64, error) {
	m := memoryQuantity().FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid memory quantity %q: use a number with an optional unit (Ki, Mi, Gi, Ti, K, M, G, T), e.g. \"512Mi\"", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	b := v * memoryUnits[m[2]]
	if b < 1 || b > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid memory quantity %q: out of range", s)
	}
	return int64(b), nil
}

// ParseCPU parses a CPU quantity ("1.5", "500m") into millicores.
func ParseCPU(s string) (int64, error) {
	m := cpuQuantity().FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid cpu quantity %q: use cores (\"1.5\") or millicores (\"500m\")", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "" {
		v *= 1000
	}
	if v < 1 || v > 1e9 {
		return 0, fmt.Errorf("invalid cpu quantity %q: out of range", s)
	}
	return int64(math.Round(v)), nil
}

// Rate is a download rate in bytes per second, written with a unit and
// "/s": "2MiB/s", "500KiB/s", "1MB/s". Empty means no cap.
type Rate string

var (
	rateQuantity = lazyRegexp(`^([0-9]+(?:\.[0-9]+)?)(B|kB|KB|MB|GB|KiB|MiB|GiB)/s$`)
	rateUnits    = map[string]float64{
		"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	}
)

// RateExample is the rate the errors of ParseRate show.
const RateExample = "2MiB/s"

// ParseRate parses a rate ("2MiB/s", "500KiB/s", "1MB/s") into bytes per
// second, at least 1. kB, MB and GB are powers of 1000 (KB is kB); KiB,
// MiB and GiB powers of 1024.
func ParseRate(s string) (int64, error) {
	m := rateQuantity().FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid rate %q: use bytes per second, a number with a unit (B, kB, MB, GB, KiB, MiB, GiB) and \"/s\", e.g. %q or \"500KiB/s\"", s, RateExample)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	b := v * rateUnits[m[2]]
	if b < 1 {
		return 0, fmt.Errorf("invalid rate %q: must be at least 1B/s; leave it out for no cap", s)
	}
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid rate %q: out of range", s)
	}
	return int64(b), nil
}

// BytesPerSecond is r in bytes per second, 0 when r is empty (no cap).
func (r Rate) BytesPerSecond() (int64, error) {
	if r == "" {
		return 0, nil
	}
	return ParseRate(string(r))
}
