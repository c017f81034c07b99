package render

// The -update flag of internal/golden, so that go test ./... -update works.
import _ "github.com/tend-dev/tend/internal/golden"
