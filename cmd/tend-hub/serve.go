package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/tokenfile"
	"github.com/tend-dev/tend/manifest"
)

func newServeCommand(g *globals) *cobra.Command {
	var listen, readTokenFile, webhook, fleetSource string
	var fleetEvery time.Duration
	var keepReleases int
	var publicRead bool
	var db dbFlags
	maxConns := hub.DefaultMaxConnections
	cmd := &cobra.Command{
		Use:   "tend-hub --listen ADDR [--db DB | --db-file FILE] [--read-token-file FILE | --public-read] [--webhook URL]",
		Short: "Serve the fleet's view: take the agents' status reports, show devices and releases",
		Long: "tend-hub takes the status documents agents post (report.url: https://HUB/v1/reports, with report.tokenFile\n" +
			"holding a token from tend-hub token create), keeps each device's state and release events in DB\n" +
			"(sqlite:///PATH, or postgres://… for several hubs behind one load balancer; the schema is migrated\n" +
			"at start), and serves the fleet page at /, JSON under /v1/devices and /v1/releases, /metrics and\n" +
			"/healthz. Devices work the same while it is down. Devices of a rollout with brakes ask\n" +
			"GET /v1/verdict, with their report token, before taking a release in a later wave; --webhook\n" +
			"posts a JSON event (Slack-compatible text) when brakes trip or a device goes into a crash loop.\n" +
			"DB may come from --db-file FILE or TEND_HUB_DB instead, and a PostgreSQL password from PGPASSWORD or\n" +
			"~/.pgpass: ps shows --db. Logs show DB without its password.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			opts := hub.Options{PublicRead: publicRead, Log: log, Webhook: webhook}
			switch {
			case readTokenFile != "" && publicRead:
				return errors.New("--read-token-file and --public-read exclude each other: choose one")
			case readTokenFile != "":
				if opts.ReadToken, err = tokenfile.Read(readTokenFile, "--read-token-file"); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			if fleetSource != "" {
				fs, err := newFleetSource(fleetSource, fleetEvery, log)
				if err != nil {
					return err
				}
				opts.Fleet = &hub.Fleet{}
				wctx, stop := context.WithCancel(ctx)
				defer stop()
				go fs.Watch(wctx, opts.Fleet)
			}
			if keepReleases < hub.MinKeepReleases {
				return fmt.Errorf("--keep-releases %d: keep at least %d, more than the releases one report may name", keepReleases, hub.MinKeepReleases)
			}
			store, err := db.open(ctx, log)
			if err != nil {
				return err
			}
			defer store.Close()
			store.KeepReleases = keepReleases
			srv, err := hub.NewServer(store, opts)
			if err != nil {
				return err
			}
			defer srv.Close()
			if maxConns < 1 {
				return fmt.Errorf("--max-connections %d: give 1 or more", maxConns)
			}
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			l = netutil.LimitListener(l, maxConns)
			hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			log.Info("hub listening", "listen", l.Addr().String(), "db", store.String())
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(l) }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return hs.Shutdown(sctx)
		},
	}
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	f := cmd.Flags()
	g.addFlags(cmd)
	f.StringVar(&listen, "listen", "127.0.0.1:8420", "address to serve on (HOST:PORT)")
	db.register(f)
	f.IntVar(&maxConns, "max-connections", maxConns, "connections served at once; more wait until one closes")
	f.StringVar(&readTokenFile, "read-token-file", "", "file holding the token reading needs (bearer token, or the password of basic auth)")
	f.BoolVar(&publicRead, "public-read", false, "let anyone who reaches the hub read it, without a token")
	f.StringVar(&fleetSource, "fleet-source", "", "an AgentConfig file whose source: block names the fleet repo: the hub works out each device's rollout and wave from its Rollouts and Device labels, rather than believe reports")
	f.IntVar(&keepReleases, "keep-releases", hub.DefaultKeepReleases, "how many releases the hub keeps each device's part in, newest first")
	f.DurationVar(&fleetEvery, "fleet-interval", time.Minute, "how often the hub reads the fleet repo of --fleet-source")
	f.StringVar(&webhook, "webhook", "", "URL to POST a JSON event to (Slack-compatible text field) when brakes trip for a release or a device crash-loops")
	return cmd
}

func newTokenCommand(g *globals) *cobra.Command {
	token := &cobra.Command{Use: "token", Short: "Manage the devices' report tokens", Args: cobra.NoArgs}
	var db dbFlags
	create := &cobra.Command{
		Use:   "create DEVICE [--db DB | --db-file FILE]",
		Short: "Make a token DEVICE reports with; printed once, as the last line",
		Long: "create stores the hash of a new token for DEVICE and prints the token as the last line of its\n" +
			"output. Write it to the file the device's report.tokenFile names. A device may have several.",
		Args: cobra.ExactArgs(1),
		RunE: g.withStore(&db, func(cmd *cobra.Command, store *hub.Store, args []string) error {
			tok, err := store.CreateToken(cmd.Context(), args[0], time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Token for device %s (write it to its report.tokenFile; it is not shown again):\n%s\n", args[0], tok)
			return err
		}),
	}
	g.addFlags(create)
	db.register(create.Flags())
	token.AddCommand(create, newTokenRevokeCommand(g))
	return token
}

func newDeviceCommand(g *globals) *cobra.Command {
	device := &cobra.Command{Use: "device", Short: "Manage the devices the hub knows", Args: cobra.NoArgs}
	var db dbFlags
	reset := &cobra.Command{
		Use:   "reset DEVICE [--db DB | --db-file FILE]",
		Short: "Forget DEVICE's reports, so that its next report is taken as its first",
		Long: "reset removes DEVICE's row (its last report and the reportSeq that orders its reports), its events,\n" +
			"its part in each release and the resources it declared. Its next report is taken as its first,\n" +
			"whatever its reportSeq or lastReconcile: for a device frozen by a report from a wrong clock, or\n" +
			"downgraded to a tend without reportSeq. Its tokens are NOT removed: they stay valid, and the\n" +
			"device goes on reporting with them. The releases, and the other devices, are left as they are.",
		Args: cobra.ExactArgs(1),
		RunE: g.withStore(&db, func(cmd *cobra.Command, store *hub.Store, args []string) error {
			found, err := store.ResetDevice(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("device %q: %s has no report of it, nothing to reset: tend fleet status lists the devices it has", args[0], store)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Device %s reset: its next report is taken as its first. Its tokens are kept.\n", args[0])
			return err
		}),
	}
	g.addFlags(reset)
	db.register(reset.Flags())
	device.AddCommand(reset)
	return device
}

// newFleetSource reads the AgentConfig at file for the hub's
// --fleet-source: the fleet repo its source: block names, read whole
// (see manifest.AgentConfig.FleetDirs) into STATEDIR/hub-source every
// every.
func newFleetSource(file string, every time.Duration, log *slog.Logger) (hub.FleetSource, error) {
	c, err := manifest.LoadConfig(file)
	if err != nil {
		return hub.FleetSource{}, fmt.Errorf("--fleet-source: %w", err)
	}
	dirs, err := c.FleetDirs()
	if err != nil {
		return hub.FleetSource{}, fmt.Errorf("--fleet-source: %w", err)
	}
	if every <= 0 {
		return hub.FleetSource{}, fmt.Errorf("--fleet-interval %s: use a positive duration such as 1m", every)
	}
	dir := filepath.Join(cmp.Or(c.StateDir, manifest.DefaultStateDir), "hub-source")
	f, err := config.NewFetcher(c, dir, config.NewVerifier(c), log)
	if err != nil {
		return hub.FleetSource{}, fmt.Errorf("--fleet-source: %w", err)
	}
	timeout := c.Source.Timeout.D()
	if timeout <= 0 {
		timeout = manifest.DefaultSourceTimeout
	}
	return hub.FleetSource{Fetcher: f, Dirs: dirs, Timeout: timeout, Every: every, Log: log}, nil
}
