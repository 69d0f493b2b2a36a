package memory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store is a conversation database. It is safe for concurrent use by goroutines and by several processes on
// the same file.
type Store struct {
	db     *sql.DB
	path   string
	logger *slog.Logger
	// index is the module of the file's search index (moduleFTS5, moduleFTS4), set by Open.
	index string
	// indexMissing: this build lacks the index's module, so search and writes fail with ErrNoFTS5.
	indexMissing bool
	// module, when set, is the module a new or rebuilt index uses instead of the best one compiled in.
	module string
	// readOnly: opened with Options.ReadOnly.
	readOnly bool
}

// Options tune Open. The zero value is what Open uses.
type Options struct {
	// Logger receives migration and recovery notes; nil discards them.
	Logger *slog.Logger
	// BusyTimeout is how long a write waits for another writer (another process) before failing;
	// 0 means 10 s.
	BusyTimeout time.Duration

	// ReadOnly opens an existing database without writing to it (no file or folder created, no migration, no
	// WAL switch), for commands that only read: a database the user may read but not write (another user's,
	// a backup on a read-only mount) can still be listed and shown. Writes fail with ErrReadOnly.
	ReadOnly bool

	// module overrides the full-text module of the index (see Store.module), so tests can hold FTS4 to
	// FTS5 in one build.
	module string
}

// DefaultPath is where visor keeps its database: $XDG_DATA_HOME/visor/visor.db, else
// ~/.local/share/visor/visor.db.
func DefaultPath() (string, error) {
	if dir := os.Getenv("XDG_DATA_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "visor", "visor.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("memory: no data directory: set XDG_DATA_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".local", "share", "visor", "visor.db"), nil
}

// Open opens or creates the database at path, creating its directory, and brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWithOptions(ctx, path, Options{})
}

// OpenWithOptions is Open with options.
func OpenWithOptions(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("memory: open: empty database path (use DefaultPath): %w", ErrInvalidInput)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("memory: open %s: %w", path, err)
	}
	if err := syscall.Access(abs, 4); err != nil && !errors.Is(err, fs.ErrNotExist) { // R_OK
		return nil, fmt.Errorf("memory: cannot read the database %s (%w): give yourself read and write access (chmod u+rw %s) or pass --db with another file", abs, err, abs)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, abs, logger, opts.module)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("memory: open %s: create directory: %w", abs, err)
	}
	// Conversations are private: create the file owner-only before SQLite does (it would use 0644). SQLite
	// gives the -wal and -shm files the permissions of the database file.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			// /proc and read-only mounts answer "no such file" to a create: say what the user can do.
			return nil, fmt.Errorf("memory: cannot create the database %s (%w): its folder is not writable; pass --db with a file in a folder you can write", abs, err)
		}
		return nil, fmt.Errorf("memory: open %s: %w", abs, err)
	}
	if err := writable(abs); err != nil {
		return nil, err
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}

	// A file: URI, so that any byte in the path (?, #, %) is escaped rather than parsed as a parameter.
	// Per-connection settings live in the DSN so every pooled connection gets them:
	//   _txlock=immediate: every transaction takes the write lock at BEGIN. A deferred transaction that
	//     upgrades from read to write can fail with SQLITE_BUSY without waiting, which two visor processes
	//     writing at once would hit.
	//   _synchronous=FULL: a committed step survives power loss too, not only a killed process; a step is
	//     written every few seconds, so the fsync is cheap by comparison.
	// journal_mode is set later, after the schema version check, because it writes to the file.
	q := url.Values{}
	q.Set("_foreign_keys", "1")
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_txlock", "immediate")
	q.Set("_synchronous", "FULL")
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
	if !strings.HasPrefix(dsn, "file://") {
		return nil, fmt.Errorf("memory: open %s: cannot form a database URI: %w", abs, ErrInvalidInput)
	}
	db := sql.OpenDB(connector{dsn: dsn, driver: newDriver()})
	s := &Store{db: db, path: abs, logger: logger, module: opts.module}
	if err := s.init(ctx); err != nil {
		db.Close()
		if notADatabase(err) {
			return nil, fmt.Errorf("memory: %s is not a visor database (%w): pass --db with another file, or move this one away", abs, err)
		}
		if !strings.Contains(err.Error(), abs) {
			return nil, fmt.Errorf("memory: %s: %w", abs, err)
		}
		return nil, err
	}
	return s, nil
}

// writable says why SQLite could not write the database at abs, if it could not: the file itself, or its
// folder, where SQLite keeps the -wal and -shm files beside it. (Without this check a read-only file failed
// on its first query with "attempt to write a readonly database", which names no fix.)
func writable(abs string) error {
	const wOK = 2
	if err := syscall.Access(abs, wOK); err != nil {
		return fmt.Errorf("memory: %w: %s is read-only (%w): give yourself write access (chmod u+w %s), pass --db with a file you can write, or --no-store", ErrReadOnly, abs, err, abs)
	}
	if dir := filepath.Dir(abs); syscall.Access(dir, wOK) != nil {
		return fmt.Errorf("memory: %w: the folder of %s is not writable, and SQLite keeps its -wal and -shm files beside the database: give yourself write access to %s, pass --db with a file in a folder you can write, or --no-store", ErrReadOnly, abs, dir)
	}
	return nil
}

// openReadOnly opens the existing database at abs for reading only. A WAL database needs its -shm file, which
// a folder that is not writable cannot hold; then the file is opened as immutable (SQLite reads it without
// locks), which holds as long as no one writes it meanwhile, as for a file nobody here may write.
func openReadOnly(ctx context.Context, abs string, logger *slog.Logger, module string) (*Store, error) {
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("memory: open %s: %w", abs, err)
	}
	var lastErr error
	for _, extra := range []string{"", "immutable"} {
		q := url.Values{}
		q.Set("mode", "ro")
		if extra != "" {
			q.Set(extra, "1")
		}
		dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
		db := sql.OpenDB(connector{dsn: dsn, driver: newDriver()})
		s := &Store{db: db, path: abs, logger: logger, module: module, readOnly: true}
		err := s.initReadOnly(ctx)
		if err == nil {
			return s, nil
		}
		db.Close()
		lastErr = err
		if errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrReadOnly) {
			break
		}
	}
	if notADatabase(lastErr) {
		return nil, fmt.Errorf("memory: %s is not a visor database (%w): pass --db with another file", abs, lastErr)
	}
	return nil, lastErr
}

func (s *Store) initReadOnly(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	latest := migs[len(migs)-1].version
	v, err := s.schemaVersion(ctx)
	switch {
	case err != nil:
		return err
	case v > latest:
		return fmt.Errorf("memory: %s has schema version %d, but this visor knows versions up to %d: upgrade visor, or point it at another database file: %w", s.path, v, latest, ErrNewerSchema)
	case v < latest:
		return fmt.Errorf("memory: %w: %s was written by an older visor (schema %d of %d) and is read-only here, so it cannot be upgraded: open it once with write access", ErrReadOnly, s.path, v, latest)
	}
	best, err := compiledModule(ctx, s.db)
	if err != nil {
		return fmt.Errorf("memory: open %s: %w", s.path, err)
	}
	have, err := indexModule(ctx, s.db)
	if err != nil {
		return fmt.Errorf("memory: open %s: search index: %w", s.path, err)
	}
	s.index = have
	s.indexMissing = have != "" && have != moduleFTS4 && have != best
	return nil
}

// readOnlyError is err, said as what it is when a write meets a store opened read-only.
func (s *Store) readOnlyError(what string, err error) error {
	if !s.readOnly || !isSQLite(err, sqlite3.ErrReadonly) {
		return err
	}
	return fmt.Errorf("memory: %s: %w: %s is opened read-only, as its file or folder is not writable: give yourself write access to it (%w)", what, ErrReadOnly, s.path, err)
}

// notADatabase says SQLite found the file is no database, or a damaged one: by its result code, since the
// words of its message are not an API.
func notADatabase(err error) bool { return isSQLite(err, sqlite3.ErrNotADB, sqlite3.ErrCorrupt) }

// isSQLite reports whether err is one of SQLite's primary result codes.
func isSQLite(err error, codes ...sqlite3.ErrNo) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && slices.Contains(codes, se.Code)
}

// ReadOnly says the store was opened with Options.ReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close releases the database.
func (s *Store) Close() error {
	// SQLite's advice for long-lived connections: refresh planner statistics where they have gone stale.
	// It is cheap (usually a no-op) and its failure costs nothing but speed.
	if s.readOnly {
		// nothing to optimize in a file visor may not write
	} else if _, err := s.db.Exec(`PRAGMA optimize`); err != nil {
		s.logger.Debug("memory: PRAGMA optimize", "file", s.path, "err", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("memory: close %s: %w", s.path, err)
	}
	return nil
}

// connector opens connections of one DSN with the store's driver; sql.OpenDB takes it, so no driver name is
// registered globally.
type connector struct {
	dsn    string
	driver *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.driver.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.driver }

// newDriver is mattn/go-sqlite3 with the functions the FTS4 search needs on every connection.
func newDriver() *sqlite3.SQLiteDriver {
	return &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		return c.RegisterFunc("visor_bm25", bm25FTS4, true)
	}}
}

func (s *Store) init(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return err
	}
	latest := migs[len(migs)-1].version
	// Check before anything writes to the file: a newer schema is left exactly as found.
	v, err := s.schemaVersion(ctx)
	if err != nil {
		return err
	}
	if v > latest {
		return fmt.Errorf("memory: %s has schema version %d, but this visor knows versions up to %d: upgrade visor, or point it at another database file: %w", s.path, v, latest, ErrNewerSchema)
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		return fmt.Errorf("memory: open %s: enable WAL: %w", s.path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("memory: open %s: journal mode is %q, want wal (is the file on a network filesystem?)", s.path, mode)
	}
	if err := s.migrate(ctx, migs, latest); err != nil {
		return err
	}
	return s.ensureIndex(ctx)
}

func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("memory: open %s: read schema version (is it an SQLite database?): %w", s.path, err)
	}
	return v, nil
}

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads migrations/NNNN_name.sql in version order. Versions must run 1, 2, 3, … with no gaps,
// because PRAGMA user_version records the last one applied.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("memory: read embedded migrations: %w", err)
	}
	var migs []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("memory: migration %s: name must be NNNN_description.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("memory: read migration %s: %w", e.Name(), err)
		}
		migs = append(migs, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	for i, m := range migs {
		if m.version != i+1 {
			return nil, fmt.Errorf("memory: migration %s: expected version %d", m.name, i+1)
		}
	}
	if len(migs) == 0 {
		return nil, errors.New("memory: no embedded migrations")
	}
	return migs, nil
}

// migrate applies the migrations above the file's version, each in its own transaction together with the
// version bump, so a crash leaves the file at a whole version. The version is re-read inside the
// transaction because another process may be migrating the same file at the same moment.
func (s *Store) migrate(ctx context.Context, migs []migration, upTo int) error {
	for _, m := range migs {
		if m.version > upTo {
			break
		}
		applied, err := s.applyMigration(ctx, m)
		if err != nil {
			return err
		}
		if applied {
			s.logger.Info("memory: applied migration", "file", s.path, "migration", m.name, "version", m.version)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m migration) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("memory: migrate %s to version %d: %w", s.path, m.version, err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return false, fmt.Errorf("memory: migrate %s: read schema version: %w", s.path, err)
	}
	if v >= m.version {
		return false, nil
	}
	if v != m.version-1 {
		return false, fmt.Errorf("memory: migrate %s: at version %d, cannot apply %s", s.path, v, m.name)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("memory: migrate %s: apply %s: %w", s.path, m.name, err)
	}
	// PRAGMA takes no bound parameters; the version is an int we parsed.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.version)); err != nil {
		return false, fmt.Errorf("memory: migrate %s: record version %d: %w", s.path, m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("memory: migrate %s: commit %s: %w", s.path, m.name, err)
	}
	return true, nil
}

// withTx runs fn in a write transaction (BEGIN IMMEDIATE, see Open) and commits it.
func (s *Store) withTx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory: %s: begin: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return s.readOnlyError(what, s.fullError(indexError(err)))
	}
	if err := tx.Commit(); err != nil {
		return s.readOnlyError(what, s.fullError(fmt.Errorf("memory: %s: commit: %w", what, err)))
	}
	return nil
}

// fullError says what to do about SQLITE_FULL: nothing of the transaction was written, and it can be retried.
func (s *Store) fullError(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrFull {
		return fmt.Errorf("%w (%s): free space there and retry; nothing of this write was stored: %w", ErrDiskFull, s.path, err)
	}
	return err
}

func toMillis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
