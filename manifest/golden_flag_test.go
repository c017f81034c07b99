package manifest

import _ "github.com/tend-dev/tend/internal/testkit/golden" // defines -update
