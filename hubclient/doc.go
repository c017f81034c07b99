// Package hubclient asks a hub for the fleet's view over HTTP and prints
// it for people: tend fleet status (the device table) and tend fleet
// release (a release's progress per wave, and its verdict as an exit
// code). It stands beside the flow of DESIGN.md, with hub, after status,
// and reads the hub's JSON answers as package api spells them: it links
// neither the hub (its SQL drivers) nor anything that acts on a node, so
// the device binary carries tend fleet at the cost of an HTTP client.
package hubclient
