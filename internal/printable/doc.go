// Package printable prints text tend did not write (the tags and media
// types a registry lists, what a brakes hub answers) so that a plan, a
// log line and the status show it as text, escaped and bounded. It is
// support for the stages that quote such text, not a stage of the flow.
package printable
