package report

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/visorhq/visor/internal/cliflag"
	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/textcut"
	"github.com/visorhq/visor/internal/typo"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

const SessionsUsage = `usage: visor sessions <command>

  list [--agent NAME] [--limit N]          sessions, most recent first
  show ID                                  a session's conversation (ID may be a unique prefix)
  search [flags] QUERY...                  full-text search over messages and tool output
      --session ID --agent NAME --role ROLE --since DATE --until DATE --limit N
      --raw   pass QUERY to SQLite's full-text search as is (AND, OR, NOT, NEAR, "phrases", prefix*)
  export ID --format md|json [--out DIR [--force]]
                                           md with --out writes DIR/ID.md and the images beside it;
                                           --force replaces an existing DIR/ID.md
  fork ID [--at MSG]                       a new session sharing ID's history up to message #MSG (default:
                                           its last); continue it with visor ask --session NEWID
  rm ID [--cascade]                        delete; --cascade also deletes its forks and continuations
`

// ParseFlags parses a subcommand's flags: the command line's own parser, so its errors read as every command's.
type ParseFlags func(fs *flag.FlagSet, args []string, usage func()) error

// RunSessions runs `visor sessions ARGS...`, writing results to stdout. Dates accept 2006-01-02,
// RFC 3339, or a duration back from now (36h, 7d).
func RunSessions(ctx context.Context, store *memory.Store, args []string, stdout io.Writer, parse ParseFlags) error {
	if len(args) == 0 {
		io.WriteString(stdout, SessionsUsage)
		return invalid("sessions: say which: visor sessions list, show ID, search QUERY, export ID, fork ID or rm ID")
	}
	cmd, rest := args[0], args[1:]
	if store.ReadOnly() && (cmd == "rm" || cmd == "delete" || cmd == "fork") {
		return fmt.Errorf("sessions %s: %s is read-only here (its file or folder is not writable): give yourself write access to it first: %w",
			cmd, store.Path(), memory.ErrReadOnly)
	}
	fs := flag.NewFlagSet("sessions "+cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { io.WriteString(stdout, SessionsUsage) }
	switch cmd {
	case "list", "ls":
		agent := fs.String("agent", "", "only sessions of this agent")
		limit := fs.Int("limit", 50, "at most this many")
		if _, err := parseInterspersed(parse, fs, rest, 0, 0); err != nil {
			return err
		}
		return cliList(ctx, store, session.ListOptions{Agent: *agent, Limit: *limit}, stdout)
	case "show":
		id, err := sessionArg(ctx, store, parse, fs, rest)
		if err != nil {
			return err
		}
		// A stored answer or title may come from a gateway client or a web user: it must not drive the terminal.
		w := termtext.NewWriter(stdout)
		if err := store.Export(ctx, id, "md", w, ""); err != nil {
			return err
		}
		return w.Flush()
	case "search":
		var q memory.Query
		fs.StringVar(&q.SessionID, "session", "", "only this session")
		fs.StringVar(&q.Agent, "agent", "", "only sessions of this agent")
		fs.StringVar(&q.Role, "role", "", "only messages of this role (user, assistant, tool, system)")
		since := fs.String("since", "", "from this date")
		until := fs.String("until", "", "before this date")
		fs.IntVar(&q.Limit, "limit", 20, "at most this many hits")
		fs.BoolVar(&q.Raw, "raw", false, "SQLite full-text query syntax (FTS5; FTS4 in a build without -tags sqlite_fts5)")
		pos, err := parseInterspersed(parse, fs, rest, 1, -1)
		if err != nil {
			return err
		}
		q.Text = strings.Join(pos, " ")
		if q.Since, err = parseWhen(*since); err != nil {
			return err
		}
		if q.Until, err = parseWhen(*until); err != nil {
			return err
		}
		if q.SessionID != "" {
			if q.SessionID, err = store.ResolveSessionID(ctx, q.SessionID); err != nil {
				return err
			}
		}
		return cliSearch(ctx, store, q, stdout)
	case "export":
		format := fs.String("format", "md", "md or json")
		out := fs.String("out", "", "directory to write ID.md or ID.json (and images) into; default stdout")
		force := fs.Bool("force", false, "replace an ID.md or ID.json already in --out")
		id, err := sessionArg(ctx, store, parse, fs, rest)
		if err != nil {
			return err
		}
		return cliExport(ctx, store, id, *format, *out, *force, stdout)
	case "fork":
		at := fs.Int64("at", 0, "fork after this message (the #N in show); 0 means the last message")
		id, err := sessionArg(ctx, store, parse, fs, rest)
		if err != nil {
			return err
		}
		if *at == 0 {
			msgs, err := store.Messages(ctx, id)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return invalid("sessions fork: session %s has no messages to fork from", id)
			}
			*at = msgs[len(msgs)-1].ID
		}
		f, err := store.Fork(ctx, id, *at)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", f.ID)
		return nil
	case "rm", "delete":
		cascade := fs.Bool("cascade", false, "also delete forks and continuations of the session")
		id, err := sessionArg(ctx, store, parse, fs, rest)
		if err != nil {
			return err
		}
		deleted, err := store.DeleteSession(ctx, id, *cascade)
		if err != nil {
			return err
		}
		for _, d := range deleted {
			fmt.Fprintf(stdout, "deleted %s\n", d)
		}
		return nil
	case "help", "-h", "--help":
		io.WriteString(stdout, SessionsUsage)
		return nil
	}
	if near := typo.Nearest(cmd, sessionCommands); near != "" {
		return invalid("sessions: unknown command %q (did you mean %q? visor sessions -h lists them)", cmd, near)
	}
	return invalid("sessions: unknown command %q (visor sessions -h lists them)", cmd)
}

// sessionCommands are the words visor sessions takes, for a mistyped one's suggestion.
var sessionCommands = []string{"list", "show", "search", "export", "fork", "rm", "help"}

// invalid is a mistake in the command line: one line with the fix (exit 2), of the kind memory.ErrInvalidInput,
// without that error's own words on the line.
func invalid(format string, args ...any) error {
	return &cliflag.UsageError{Msg: fmt.Sprintf(format, args...), Err: memory.ErrInvalidInput}
}

// sessionArg parses a command's flags and its one argument, a session id or unique prefix, and resolves it.
func sessionArg(ctx context.Context, store *memory.Store, parse ParseFlags, fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(parse, fs, args, 0, 1)
	if err != nil {
		return "", err
	}
	if len(pos) == 0 {
		return "", invalid("%s: which session? give its id or a unique prefix (visor sessions list shows them)", fs.Name())
	}
	if strings.TrimSpace(pos[0]) == "" {
		// An empty prefix matches every id: it would pick some session.
		return "", invalid("%s: the session id is empty: give an id or a unique prefix (visor sessions list shows them)", fs.Name())
	}
	return store.ResolveSessionID(ctx, pos[0])
}

// parseInterspersed parses flags that may come after positional arguments (`export ID --format json`),
// which the flag package alone stops at. It checks the number of positionals (max -1: any).
func parseInterspersed(parse ParseFlags, fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args, fs.Usage); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			var ue *cliflag.UsageError
			if errors.As(err, &ue) {
				return nil, &cliflag.UsageError{Msg: ue.Msg, Err: memory.ErrInvalidInput}
			}
			return nil, fmt.Errorf("%w: %w", memory.ErrInvalidInput, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(pos) < min && fs.Name() == "sessions search":
		return nil, invalid(`sessions search: no query: visor sessions search WORDS… ("exact phrase", --session ID)`)
	case len(pos) < min || (max >= 0 && len(pos) > max):
		return nil, invalid("%s takes %s, not %q (visor %s -h)", fs.Name(),
			map[int]string{0: "no arguments", 1: "one session id"}[max], strings.Join(pos, " "), fs.Name())
	}
	return pos, nil
}

func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err == nil && fmt.Sprint(days) == n {
			return time.Now().AddDate(0, 0, -days), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, invalid("sessions search: date %q: use 2006-01-02, RFC 3339, or an age like 36h or 7d", s)
}

// cliList lists sessions as every front end does (session.List: empty ones left by an older visor are not shown).
func cliList(ctx context.Context, store *memory.Store, o session.ListOptions, stdout io.Writer) error {
	list, err := session.List(ctx, store, o)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no sessions")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tAGENT\tMODEL\tMSGS\tTITLE")
	for _, s := range list {
		title := s.Title
		if s.ParentID != "" {
			title = fmt.Sprintf("%s (%s of %s)", title, s.LinkKind, s.ParentID)
		}
		if s.OpenTurn {
			title += " [turn open]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", cell(s.ID), s.Updated.Local().Format("2006-01-02 15:04"),
			cell(dash(s.Agent)), cell(dash(s.Model)), s.Messages, cell(title))
	}
	return tw.Flush()
}

// cell is stored text as one table cell: on one line, and cleaned, since titles and names may come from any
// client of the store (a gateway request, a web user) and must not drive the terminal.
func cell(s string) string { return termtext.Clean(strings.Join(strings.Fields(s), " ")) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cliSearch(ctx context.Context, store *memory.Store, q memory.Query, stdout io.Writer) error {
	hits, err := store.Search(ctx, q)
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		fmt.Fprintln(stdout, "no matches")
		return nil
	}
	for _, h := range hits {
		where := fmt.Sprintf("message %d", h.MessageID)
		if h.ToolRunID != 0 {
			where = fmt.Sprintf("tool run %d", h.ToolRunID)
		}
		fmt.Fprintf(stdout, "%s  %s  %s  %s  %s\n    %s\n", cell(h.SessionID), h.CreatedAt.Local().Format("2006-01-02 15:04"),
			cell(h.Role), where, cell(dash(h.SessionTitle)), termtext.Clean(textcut.Line(h.Snippet, 200)))
	}
	return nil
}

func cliExport(ctx context.Context, store *memory.Store, id, format, dir string, force bool, stdout io.Writer) error {
	if format != "md" && format != "json" {
		return invalid("sessions export: --format %q: use md or json", format)
	}
	if dir == "" {
		if !termtext.IsTerminal(stdout) {
			return store.Export(ctx, id, format, stdout, "") // a file or a pipe gets the text as stored
		}
		w := termtext.NewWriter(stdout)
		if err := store.Export(ctx, id, format, w, ""); err != nil {
			return err
		}
		return w.Flush()
	}
	// The folder and the names in it are the user's to choose: a symlink there (planted to redirect the export)
	// is refused, not followed, and a file already there is kept unless --force says to replace it.
	if st, err := os.Lstat(dir); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return invalid("sessions export: --out %s is a symlink: export into a real folder (the link's target, if that is the one you mean)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sessions export: --out %s: %w", dir, err)
	}
	path := filepath.Join(dir, id+"."+format)
	if st, err := os.Lstat(path); err == nil {
		switch {
		case !st.Mode().IsRegular():
			return invalid("sessions export: %s exists and is not a regular file: remove it or choose another --out", path)
		case !force:
			return invalid("sessions export: %s exists: pass --force to replace it, or choose another --out", path)
		}
	}
	// Write to a temporary name and rename, so an interrupted export never leaves a truncated file that looks
	// complete.
	f, err := os.CreateTemp(dir, "."+id+"-*.tmp")
	if err != nil {
		return fmt.Errorf("sessions export: %w", err)
	}
	defer os.Remove(f.Name())
	if err := store.Export(ctx, id, format, f, dir); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sessions export: write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("sessions export: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", termtext.Clean(path))
	return nil
}
