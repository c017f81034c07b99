package agent

import (
	"log/slog"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
)

// processRuntime runs the services that are processes, each in its own
// cgroup under CgroupParent.
func processRuntime(log *slog.Logger) service.Runtime { return process.New(CgroupParent, log) }
