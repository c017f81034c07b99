// Package printable prints what tend shows people: text tend did not
// write (the tags and media types a registry lists, what a brakes hub
// answers, what a device reports to the hub), so that a plan, a log line,
// the status and the hub's tables show it as text, escaped and bounded,
// on one line, or as a list cut short; and sizes, as people read disk
// sizes. It is support for the stages that quote such text, not a stage
// of the flow.
package printable
