package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/statedir"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/manifest"
)

// statusTimeout bounds the question to the local agent, which answers from
// memory.
const statusTimeout = 10 * time.Second

const statusLong = "Ask the agent listening on --listen (listen in agent.yaml, default " +
	manifest.DefaultListen + ") for its status: the applied revision, the last reconcile " +
	"and its error, the resources that are not ok and the recent drift. When no agent answers " +
	"(or listen is off), show the status last written in stateDir, by an agent after a tick or by tend apply " +
	"(when no agent ran), and say so."

// statusCmd is tend status and its flags.
type statusCmd struct {
	g      *globals
	format string
}

func newStatusCommand(g *globals) *cobra.Command {
	s := &statusCmd{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what the local agent, or the last tend apply, did",
		Long:  statusLong,
		Args:  cobra.NoArgs,
		RunE:  s.run,
	}
	g.addFlags(cmd, logFlags, []string{"state-dir", "listen"})
	cmd.Flags().StringVar(&s.format, "format", "text", "output format: text or json")
	return cmd
}

func (s *statusCmd) run(cmd *cobra.Command, _ []string) error {
	if err := oneOf("--format", s.format, "text", "json"); err != nil {
		return err
	}
	c, err := s.g.nodeConfig()
	if err != nil {
		return err
	}
	body, note, err := readStatus(cmd.Context(), c)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if s.format == "json" {
		if note != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), note)
		}
		if !bytes.HasSuffix(body, []byte("\n")) {
			body = append(body, '\n')
		}
		_, err := out.Write(body)
		return err
	}
	var st status.Status
	if err := json.Unmarshal(body, &st); err != nil {
		if note != "" {
			return fmt.Errorf("%s is not a status document: %w", statedir.Dir(c.StateDir).Status(), err)
		}
		return fmt.Errorf("the agent on %s answered GET /status with what is not a status document: %w", c.Listen, err)
	}
	if note != "" {
		fmt.Fprintf(out, "%s\n\n", note)
	}
	return status.WriteText(out, st, time.Now())
}

// readStatus asks the agent on c.Listen for its status. When no agent
// answers there, or listen is off, it reads the status the agent last
// wrote in stateDir instead, and note says so.
func readStatus(ctx context.Context, c *manifest.AgentConfig) (body []byte, note string, err error) {
	var asked error
	if c.Listen != "off" {
		body, err := getStatus(ctx, c.Listen)
		var none *noAgentError
		if !errors.As(err, &none) {
			return body, "", err
		}
		asked = err
	}
	file := statedir.Dir(c.StateDir).Status()
	body, at, err := status.ReadLast(c.StateDir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && asked != nil:
		return nil, "", fmt.Errorf("%w, and neither an agent nor tend apply has written a status in %s: is the agent running, with this stateDir?", asked, c.StateDir)
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("listen is off, and neither an agent nor tend apply has written a status in %s: has either run on this node, with this stateDir?", c.StateDir)
	case err != nil:
		return nil, "", err
	}
	when := at.UTC().Format(time.RFC3339)
	if asked != nil {
		return body, fmt.Sprintf("No agent answered at %s; last status written at %s from %s.", c.Listen, when, file), nil
	}
	return body, fmt.Sprintf("Listen is off; last status written at %s from %s.", when, file), nil
}

// noAgentError: nothing answered on the agent's address.
type noAgentError struct {
	addr string
	err  error
}

func (e *noAgentError) Error() string {
	return fmt.Sprintf("no tend agent answers on %s (GET /status: %v)", e.addr, rootCause(e.err))
}

func (e *noAgentError) Unwrap() error { return e.err }

// getStatus returns the body of GET /status from the agent on addr.
func getStatus(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	// The agent is local: no proxy from the environment stands between.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, &noAgentError{addr: addr, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read the status from the agent on %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the agent on %s answered GET /status with %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// rootCause is the innermost error: "connection refused" rather than
// "Get "http://…": dial tcp …: connect: connection refused".
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
