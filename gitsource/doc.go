// Package gitsource fetches the fleet repo and reads one device's manifests
// from a commit. It is the Git implementation of source.Fetcher, the first
// stage of DESIGN.md's flow (source ──▶ manifest): Fetch resolves the
// configured ref against the remote's advertised refs, fetches into one
// persistent bare clone only when the commit is not already there, and
// returns every *.yaml/*.yml file under the device's paths, read straight
// from the commit's tree with no checkout, after the checks that may
// refuse it here (signature, rewind, quarantine). Callers serialise Fetch
// calls on one clone folder (the agent's state lock does).
package gitsource
