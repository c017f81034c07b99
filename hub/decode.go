package hub

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tend-dev/tend/api"
)

// decodeReport reads body, a report posted with the token of device: one
// status document of this hub's formatVersion, for device, whose
// lastReconcile, reportSeq, release keys, wave and rollout are well
// formed (orderOf, keysOf, reported), its lists within bounds
// (checkLists). A refused report has the result it is counted as
// (ResultMalformed, ResultForbidden) and an error that says why; a taken
// one has result "".
func decodeReport(body []byte, device string) (*api.Status, string, error) {
	var st api.Status
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&st); err != nil {
		return nil, ResultMalformed, fmt.Errorf("report of %s is not a status document: %w", device, err)
	}
	if dec.More() {
		return nil, ResultMalformed, fmt.Errorf("report of %s has data after the status document", device)
	}
	switch {
	case st.FormatVersion != api.FormatVersion:
		return nil, ResultMalformed, fmt.Errorf("report of %s has formatVersion %q; this hub reads %q: run a tend of the hub's version", device, st.FormatVersion, api.FormatVersion)
	case st.Device != device:
		return nil, ResultForbidden, fmt.Errorf("the token of device %s cannot report for device %q", device, st.Device)
	}
	if _, err := orderOf(&st); err != nil {
		return nil, ResultMalformed, fmt.Errorf("report of %s: %w", device, err)
	}
	if _, err := keysOf(&st); err != nil {
		return nil, ResultMalformed, fmt.Errorf("report of %s: %w", device, err)
	}
	if _, err := reported(&st); err != nil {
		return nil, ResultMalformed, fmt.Errorf("report of %s: %w", device, err)
	}
	if err := checkLists(&st); err != nil {
		return nil, ResultMalformed, fmt.Errorf("report of %s: %w", device, err)
	}
	return &st, "", nil
}
