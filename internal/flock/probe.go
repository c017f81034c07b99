package flock

// Holder is what a Probe of a file's lock found.
type Holder struct {
	Held bool // a process holds an exclusive flock on the file
	// PID is the process that took the lock, as /proc/locks lists it; 0
	// when it does not (another pid namespace, another system).
	PID int
}
