package manifest

import (
	"encoding/json"
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

// Rate is a download rate, written in bytes per second with a unit and
// "/s": "2MiB/s", "500KiB/s", "1MB/s". It is parsed once, where the
// config is decoded or the flag read, and carried as parsed; the zero
// Rate (left out, or "") is no cap.
type Rate struct {
	text string // as written
	bps  int64  // bytes per second, at least 1; 0 for no cap
}

var (
	rateQuantity = lazyRegexp(`^([0-9]+(?:\.[0-9]+)?)(B|kB|KB|MB|GB|KiB|MiB|GiB)/s$`)
	rateUnits    = map[string]float64{
		"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	}
)

// RateExample is the rate the errors of ParseRate show.
const RateExample = "2MiB/s"

// ParseRate parses a rate ("2MiB/s", "500KiB/s", "1MB/s") of at least 1
// byte per second. kB, MB and GB are powers of 1000 (KB is kB); KiB, MiB
// and GiB powers of 1024.
func ParseRate(s string) (Rate, error) {
	m := rateQuantity().FindStringSubmatch(s)
	if m == nil {
		return Rate{}, fmt.Errorf("invalid rate %q: use bytes per second, a number with a unit (B, kB, MB, GB, KiB, MiB, GiB) and \"/s\", e.g. %q or \"500KiB/s\"", s, RateExample)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	b := v * rateUnits[m[2]]
	if b < 1 {
		return Rate{}, fmt.Errorf("invalid rate %q: must be at least 1B/s; leave it out for no cap", s)
	}
	if b > math.MaxInt64/2 {
		return Rate{}, fmt.Errorf("invalid rate %q: out of range", s)
	}
	return Rate{text: s, bps: int64(b)}, nil
}

// BytesPerSecond is r in bytes per second, 0 for the zero Rate (no cap).
func (r Rate) BytesPerSecond() int64 { return r.bps }

// IsZero reports whether r is the zero Rate: no cap.
func (r Rate) IsZero() bool { return r.bps == 0 }

// String is r as it was written; "" for the zero Rate.
func (r Rate) String() string { return r.text }

// MarshalJSON writes r as it was written.
func (r Rate) MarshalJSON() ([]byte, error) { return json.Marshal(r.text) }

// UnmarshalJSON reads a rate as ParseRate does; "" is the zero Rate.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("rate must be a string like %q", RateExample)
	}
	if s == "" {
		*r = Rate{}
		return nil
	}
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}
