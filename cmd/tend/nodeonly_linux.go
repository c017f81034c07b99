package main

import "github.com/spf13/cobra"

// nodeOnly returns the commands that work on this node as they are: on
// Linux they run.
func nodeOnly(cmds ...*cobra.Command) []*cobra.Command { return cmds }
