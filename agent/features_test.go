package agent

// The optional features, which cmd/tend registers from its feature_*.go
// files: the agent's tests run with all of them, as the default build does.
import (
	_ "github.com/tend-dev/tend/applier/service/container"
	_ "github.com/tend-dev/tend/notify/mqtt"
	_ "github.com/tend-dev/tend/oci/verify/cosign"
	_ "github.com/tend-dev/tend/oci/verify/notation"
)
