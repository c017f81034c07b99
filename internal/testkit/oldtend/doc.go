// Package oldtend builds tend as an earlier commit of this repository had
// it, for upgrade tests: the previous release (the newest v* tag before
// HEAD), or Baseline while no release precedes HEAD. The source comes from
// the repository's history with git archive, never from the working tree,
// and the binary is built with the go command the tests use and cached by
// commit under the tools folder (TEND_TOOLS), so that a second run does not
// build it again. It is test support, not part of tend's flow.
package oldtend
