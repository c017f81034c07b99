package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tend-dev/tend/internal/buildinfo"
	"github.com/tend-dev/tend/internal/logging"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…"
// (make build), as tend's.
var (
	version = ""
	commit  = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

// globals are the values of the logging flags every command takes.
type globals struct {
	logFormat, logLevel string
}

// addFlags gives cmd the logging flags.
func (g *globals) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&g.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
	f.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// logger returns the slog logger the flags ask for, writing to w.
func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	f, ok := w.(*os.File)
	return logging.New(w, g.logFormat, g.logLevel, ok && term.IsTerminal(int(f.Fd())))
}

// newRootCommand is tend-hub: it serves the hub, and its subcommands
// manage the hub's database.
func newRootCommand() *cobra.Command {
	g := &globals{}
	root := newServeCommand(g)
	root.AddCommand(newTokenCommand(g), newDeviceCommand(g), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Long:  "version prints what tend version prints, for tend-hub.",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Read(version, commit).Line("tend-hub", runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
		},
	}
}
