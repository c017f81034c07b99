package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
)

// statusTimeout bounds the question to the local agent, which answers from
// memory.
const statusTimeout = 10 * time.Second

func newStatusCommand(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Ask the local agent what it last did",
		Long: "Ask the agent listening on --listen (listen in agent.yaml, default " +
			"127.0.0.1:9469) for its status: the applied revision, the last reconcile " +
			"and its error, the resources that are not ok and the recent drift.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("--format", format, "text", "json"); err != nil {
				return err
			}
			addr, err := statusAddr(g, cmd)
			if err != nil {
				return err
			}
			body, err := getStatus(cmd.Context(), addr)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				if !bytes.HasSuffix(body, []byte("\n")) {
					body = append(body, '\n')
				}
				_, err := out.Write(body)
				return err
			}
			var s agent.Status
			if err := json.Unmarshal(body, &s); err != nil {
				return fmt.Errorf("the agent on %s answered GET /status with what is not a status document: %w", addr, err)
			}
			return s.WriteText(out, time.Now())
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// statusAddr is where the agent listens: --listen (or TEND_LISTEN) when
// given, which needs no valid config, else listen in the agent config.
func statusAddr(g *globals, cmd *cobra.Command) (string, error) {
	if g.flags != nil && g.flags.Changed("listen") {
		return g.listen, nil
	}
	c, _, err := g.setup(cmd)
	if err != nil {
		return "", err
	}
	return c.Listen, nil
}

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
		return nil, fmt.Errorf("no tend agent answers on %s: is it running? (GET /status: %v)", addr, rootCause(err))
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
