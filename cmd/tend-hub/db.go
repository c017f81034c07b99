package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tend-dev/tend/hub"
)

// envHubDB names the hub's database when neither --db nor --db-file does.
const envHubDB = "TEND_HUB_DB"

// dbFlags are the flags of every tend-hub command that opens the hub's
// database: --db URL, or --db-file FILE holding the URL, or TEND_HUB_DB,
// else hub.DefaultDB. A PostgreSQL password is best kept out of the URL
// (PGPASSWORD, ~/.pgpass); in --db, ps shows it to every user.
type dbFlags struct {
	url, file string
	flags     *pflag.FlagSet
}

func (d *dbFlags) register(f *pflag.FlagSet) {
	d.flags = f
	f.StringVar(&d.url, "db", hub.DefaultDB, "the hub's database: sqlite:///PATH or postgres://USER@HOST/DB (or "+envHubDB+"); put a password in PGPASSWORD or ~/.pgpass, or the URL in --db-file: ps shows --db")
	f.StringVar(&d.file, "db-file", "", "file holding the database URL, instead of --db (keeps a password in it out of ps)")
}

// resolve is the database URL the flags and the environment name, and
// where it came from, for messages.
func (d *dbFlags) resolve() (dbURL, from string, err error) {
	dbSet := d.flags != nil && d.flags.Changed("db")
	switch {
	case d.file != "" && dbSet:
		return "", "", errors.New("--db and --db-file exclude each other: give one")
	case d.file != "":
		b, err := os.ReadFile(d.file)
		if err != nil {
			return "", "", fmt.Errorf("--db-file: %w", err)
		}
		u := strings.TrimSpace(string(b))
		if u == "" || strings.ContainsAny(u, "\r\n") {
			return "", "", fmt.Errorf("--db-file %s holds no database URL (it is empty, or has several lines): write one line, e.g. postgres://USER@HOST/DB?sslmode=verify-full", d.file)
		}
		return u, "--db-file " + d.file, nil
	case dbSet:
		return d.url, "--db", nil
	}
	if u := strings.TrimSpace(os.Getenv(envHubDB)); u != "" {
		return u, envHubDB, nil
	}
	return d.url, "--db", nil
}

// open opens the database the flags name, warning on log when a password
// is where others may read it.
func (d *dbFlags) open(ctx context.Context, log *slog.Logger) (*hub.Store, error) {
	dbURL, from, err := d.resolve()
	if err != nil {
		return nil, err
	}
	if hub.DSNHasPassword(dbURL) {
		switch {
		case from == "--db":
			log.Warn("the --db URL holds a password, which ps shows to every user of this machine: use --db-file, "+envHubDB+", PGPASSWORD or ~/.pgpass", "db", hub.RedactDSN(dbURL))
		case d.file != "":
			if fi, err := os.Stat(d.file); err == nil && fi.Mode().Perm()&0o077 != 0 {
				log.Warn("the --db-file holds a password and others may read it: chmod 600 it", "file", d.file, "mode", fi.Mode().Perm().String())
			}
		}
	}
	return hub.Open(ctx, dbURL)
}

// withStore is the RunE of a command on the hub's database: it opens the
// database db names, with the logger the flags ask for, runs fn with it,
// and closes it.
func (g *globals) withStore(db *dbFlags, fn func(cmd *cobra.Command, store *hub.Store, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		log, err := g.logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		store, err := db.open(cmd.Context(), log)
		if err != nil {
			return err
		}
		defer store.Close()
		return fn(cmd, store, args)
	}
}

func newTokenRevokeCommand(g *globals) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "revoke DEVICE [--db DB | --db-file FILE]",
		Short: "Delete every token of DEVICE: it can no longer report or ask a verdict",
		Long: "revoke deletes every report token of DEVICE from the hub's database, so that its reports are\n" +
			"refused 401 from the next one on, by every hub on the database. What it reported stays. Make it\n" +
			"a new token with tend-hub token create. Exits 1 when DEVICE has no token.",
		Args: cobra.ExactArgs(1),
		RunE: g.withStore(&db, func(cmd *cobra.Command, store *hub.Store, args []string) error {
			n, err := store.RevokeTokens(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("device %q has no token in %s: nothing revoked (check the name: tend fleet status lists the devices)", args[0], store)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked %d token(s) of device %s: its reports are refused from now on.\n", n, args[0])
			return err
		}),
	}
	g.addFlags(cmd)
	db.register(cmd.Flags())
	return cmd
}
