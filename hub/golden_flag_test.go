package hub

// The -update flag of internal/testkit/golden, so that go test ./... -update works.
import _ "github.com/tend-dev/tend/internal/testkit/golden"
