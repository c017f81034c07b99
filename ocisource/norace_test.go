//go:build !race

package ocisource_test

const raceEnabled = false
