//go:build race

package ocisource_test

// raceEnabled: the race detector is on, which makes compressing 65 MiB
// take a minute; it finds nothing in that single goroutine.
const raceEnabled = true
