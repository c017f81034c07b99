// Package statedir is the layout of DESIGN.md's "State on the node": the
// names of everything tend keeps under stateDir (the content-addressed
// blobs, the model versions made from them, the inventory that also holds
// the applied revision, quarantine.json, releases.json, status.json,
// report.json, the suspended marker, the locks, the clone of the fleet
// repo, the fleet artifacts, service records and logs), and
// the one place every stage asks for their paths. A name here is what
// nodes already hold on disk: changing one strands every node. It is a
// helper of every stage, not a stage of the flow.
package statedir
