//go:build !linux

package reserve

// Take holds no reserve off Linux, where the agent runs on a device.
func (r *Reserve) Take() (bool, error) { return false, nil }
