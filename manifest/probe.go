package manifest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// sampleReplicas returns a health probe's URL or address as the first and
// the last replica of s run it: ${replica} is each one's index, and a
// ${model:NAME} or ${file:PATH} a sample path, as render expands them. The
// ends suffice: a port such as 808${replica} grows with the index.
func sampleReplicas(s Service, probe string) []string {
	last := 0
	if s.Replicas != nil && *s.Replicas > 1 {
		last = *s.Replicas - 1
	}
	out := []string{expandSample(probe, 0)}
	if last > 0 && strings.Contains(probe, "${replica}") {
		out = append(out, expandSample(probe, last))
	}
	return out
}

// expandSample expands probe for the replica index i.
func expandSample(probe string, i int) string {
	return Expand(probe, func(ref string) string {
		kind, target, _ := strings.Cut(ref, ":")
		switch kind {
		case "replica":
			return strconv.Itoa(i)
		case "model":
			return "/var/lib/tend/models/" + target + "/current"
		}
		return target
	})
}

// expanded says what a probe became once expanded, when it changed.
func expanded(probe, sample string) string {
	if probe == sample {
		return ""
	}
	return fmt.Sprintf(" (expanded: %q)", sample)
}

// checkProbeURL checks an expanded health.http URL.
func checkProbeURL(s string) error {
	u, err := url.Parse(s)
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("the scheme must be http or https")
	}
	if u.Host == "" {
		return fmt.Errorf("no host")
	}
	if p := u.Port(); p != "" {
		return checkPort(p)
	}
	return nil
}

// checkProbeAddr checks an expanded health.tcp address.
func checkProbeAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	return checkPort(port)
}

func checkPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return nil
}
