// Package logging builds the slog logger of tend's and tend-hub's
// --log-format and --log-level flags.
package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// New returns the logger --log-format format and --log-level level ask
// for, writing to w: text, json, or auto (text when terminal says w is a
// person's terminal, JSON otherwise).
func New(w io.Writer, format, level string, terminal bool) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "auto":
		if terminal {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use auto, text or json", format)
}
