//go:build !linux

package agent

import (
	"log/slog"

	"github.com/tend-dev/tend/applier/service"
)

// processRuntime is nil off Linux: tend runs services on Linux only, and
// there its node commands refuse to start (see cmd/tend). What runs here
// (render, validate) opens a node to resolve, never to start a service.
func processRuntime(*slog.Logger) service.Runtime { return nil }
