// Package failpoint names the durable steps of an apply, so that the
// crash suite can kill tend at each of them. In a normal build Hit does
// nothing; in a build with the tag failpoints, the process kills itself
// (SIGKILL, as a power cut or kill -9 would end it) at the step that
// $TEND_FAILPOINT names, read once at start: "NAME" for its first time,
// "NAME#N" for its N-th. It is a helper of the stages that write (a no-op
// in every release build), for the crash suite; not a stage of the flow.
package failpoint
