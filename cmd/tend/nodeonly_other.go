//go:build !linux

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// nodeOnly makes the commands that work on this node fail at once, before
// any work: they run on the device, which is Linux. Their help and flags
// stay, so that scripts and docs read the same on every system.
func nodeOnly(cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		name := c.Name()
		c.Args, c.Run, c.PreRunE, c.PreRun = cobra.ArbitraryArgs, nil, nil, nil
		c.RunE = func(*cobra.Command, []string) error {
			return fmt.Errorf("tend %s runs on the device and needs Linux; on this system use validate, render, diff, schema, publish or notify", name)
		}
	}
	return cmds
}
