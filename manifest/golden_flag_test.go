package manifest

import _ "github.com/tend-dev/tend/internal/golden" // defines -update
