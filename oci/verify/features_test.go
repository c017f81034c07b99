package verify_test

// The signature checkers, which cmd/tend registers from its feature_*.go
// files: these tests verify through them, as the default build does.
import (
	_ "github.com/tend-dev/tend/oci/verify/cosign"
	_ "github.com/tend-dev/tend/oci/verify/notation"
)
