package hub

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// DefaultDB is the hub's database when --db is not given.
const DefaultDB = "sqlite:///var/lib/tend/hub.db"

// dialect is the SQL a database speaks where SQLite and PostgreSQL differ.
type dialect int

const (
	sqlite dialect = iota
	postgres
)

// Store is the hub's database: SQLite for one hub, PostgreSQL for several
// replicas behind one load balancer.
type Store struct {
	db      *sql.DB
	dialect dialect
	display string // the DB URL without credentials
	// KeepReleases is how many releases the hub keeps each device's part
	// in, newest first (see trimReleases); 0 is DefaultKeepReleases.
	KeepReleases int
}

// Open opens the database at dbURL (sqlite:///PATH or postgres://…) and
// brings its schema up to date.
func Open(ctx context.Context, dbURL string) (*Store, error) {
	s, err := open(dbURL)
	if err != nil {
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("open %s: %w%s", s.display, err, passwordHint(s.dialect, err))
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

func open(dbURL string) (*Store, error) {
	shown := RedactDSN(dbURL)
	if isKeyValueDSN(dbURL) {
		return nil, fmt.Errorf("--db %q is a key=value connection string; the hub takes a URL: postgres://USER@HOST:PORT/DB?sslmode=verify-full, with the password in PGPASSWORD or ~/.pgpass", shown)
	}
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("--db %q is not a database URL: use sqlite:///var/lib/tend/hub.db or postgres://USER@HOST/DB", shown)
	}
	switch u.Scheme {
	case "sqlite":
		path := u.Path
		if u.Host != "" || u.User != nil || path == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("--db %s: name an absolute file path, sqlite:///var/lib/tend/hub.db (three slashes)", shown)
		}
		// WAL: readers never block the writer; busy_timeout: writers wait
		// for each other rather than fail.
		dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", shown, err)
		}
		return &Store{db: db, dialect: sqlite, display: shown}, nil
	case "postgres", "postgresql":
		// PostgreSQL's driver reads a URL by its lower-case prefix alone,
		// and anything else as key=value.
		if !strings.HasPrefix(dbURL, u.Scheme+"://") {
			return nil, fmt.Errorf("--db %s: write it postgres://USER@HOST/DB (the scheme in lower case, two slashes)", shown)
		}
		db, err := sql.Open("pgx", dbURL)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", shown, err)
		}
		db.SetMaxOpenConns(16)
		return &Store{db: db, dialect: postgres, display: shown}, nil
	}
	return nil, fmt.Errorf("--db %s: unknown scheme %q: use sqlite:///PATH or postgres://…", shown, u.Scheme)
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// String is the database URL without credentials.
func (s *Store) String() string { return s.display }

// tx runs fn in one transaction, committed when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", s.display, err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", s.display, err)
	}
	return nil
}
