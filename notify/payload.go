package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Payload is what tend notify publishes: {"revision": "…"}, the commit CI
// merged (a full hash, or REF@sha1:COMMIT).
type Payload struct {
	Revision string `json:"revision,omitempty"`
}

// MaxPayload is the largest payload read; a longer one is malformed.
const MaxPayload = 4096

// ErrMalformed is the error of a payload that is neither empty nor a JSON
// object whose revision, if any, is a string.
var ErrMalformed = errors.New("malformed notify payload")

// ParsePayload reads a message's payload. An empty one asks for a tick
// like any other; anything but a JSON object with an optional string
// "revision" (other fields are ignored) is ErrMalformed.
func ParsePayload(b []byte) (Payload, error) {
	var p Payload
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return p, nil
	}
	if len(b) > MaxPayload {
		return p, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), MaxPayload)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return p, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if raw, ok := fields["revision"]; ok {
		if err := json.Unmarshal(raw, &p.Revision); err != nil {
			return p, fmt.Errorf("%w: revision is not a string", ErrMalformed)
		}
	}
	return p, nil
}

// Encode returns the payload as tend notify publishes it.
func (p Payload) Encode() []byte {
	b, _ := json.Marshal(p) // a struct of one string always marshals
	return b
}
