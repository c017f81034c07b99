package main

// The checkers of a signed fleet artifact (an oci:// --fleet-source whose
// source.verify asks cosign or Notation), as tend registers them: the hub
// checks what it reads as the agents do.
import (
	_ "github.com/tend-dev/tend/oci/verify/cosign"
	_ "github.com/tend-dev/tend/oci/verify/notation"
)
