package manifest

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

var (
	memoryQuantity = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$`)
	cpuQuantity    = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(m?)$`)
	memoryUnits    = map[string]float64{
		"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
	}
)

// ParseMemory parses a memory quantity ("512Mi", "1G", "1048576") into bytes.
func ParseMemory(s string) (int64, error) {
	m := memoryQuantity.FindStringSubmatch(s)
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
	m := cpuQuantity.FindStringSubmatch(s)
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
