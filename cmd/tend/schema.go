package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/schema"
)

func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema [KIND]",
		Short: "Print the JSON Schema of a kind of document (" + strings.Join(schema.Kinds(), ", ") + ")",
		Long: "schema prints the JSON Schema of a kind of document tend reads, for editors and CI checks:\n" +
			"  tend schema Device > schema/device.json\n" +
			"and, on the first line of a manifest,\n" +
			"  # yaml-language-server: $schema=../../schema/device.json\n" +
			"Without KIND it lists the kinds.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				for _, k := range schema.Kinds() {
					fmt.Fprintln(out, k)
				}
				return nil
			}
			b, err := schema.Get(args[0])
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		},
	}
}
