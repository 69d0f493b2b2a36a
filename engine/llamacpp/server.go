package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/internal/safefile"
)

// Config is what to run. Zero values leave llama-server's own defaults in place.
type Config struct {
	Binary     string // path to llama-server; empty means Find("")
	Model      string // -m
	MMProj     string // --mmproj
	Ctx        int    // -c
	CacheTypeK string // -ctk
	CacheTypeV string // -ctv
	SpecType   string // --spec-type, e.g. draft-mtp
	Parallel   int    // -np
	GPULayers  string // -ngl (a number, "auto" or "all")
	Threads    int    // -t
	Alias      string // --alias, the model name the API reports
	// Args, when set, are llama-server's arguments as they are (a plan's argument list, which already names the
	// model, context and placement); visor adds only --host/--port before them and --alias, -t and ExtraArgs
	// after. The typed fields Args would duplicate (Model through GPULayers) must then be empty.
	Args      []string
	ExtraArgs []string
	Host      string // default 127.0.0.1
	Port      int    // 0 picks a free port
	Env       []string

	LogFile string        // every server log line is appended here when set
	OnLog   func(string)  // observer for each log line (e.g. progress in the CLI)
	OnState func(State)   // observer for state changes
	Ready   time.Duration // how long to wait for /health; default 5 minutes (big models load slowly)
	Logger  *slog.Logger
}

// CommandLine returns the llama-server command-line arguments for c, without the binary.
func (c Config) CommandLine(host string, port int) []string {
	a := []string{"--host", host, "--port", strconv.Itoa(port)}
	add := func(flag, v string) {
		if v != "" {
			a = append(a, flag, v)
		}
	}
	if len(c.Args) > 0 {
		a = append(a, c.Args...)
		add("--alias", c.Alias)
		if c.Threads > 0 {
			add("-t", strconv.Itoa(c.Threads))
		}
		return append(a, c.ExtraArgs...)
	}
	add("-m", c.Model)
	add("--mmproj", c.MMProj)
	if c.Ctx > 0 {
		add("-c", strconv.Itoa(c.Ctx))
	}
	add("-ctk", c.CacheTypeK)
	add("-ctv", c.CacheTypeV)
	add("--spec-type", c.SpecType)
	if c.Parallel > 0 {
		add("-np", strconv.Itoa(c.Parallel))
	}
	add("-ngl", c.GPULayers)
	if c.Threads > 0 {
		add("-t", strconv.Itoa(c.Threads))
	}
	add("--alias", c.Alias)
	return append(a, c.ExtraArgs...)
}

// State is the supervised process's lifecycle state.
type State int

const (
	StateStarting State = iota
	StateLoading
	StateReady
	StateStopping
	StateStopped
	StateCrashed
)

func (s State) String() string {
	return [...]string{"starting", "loading", "ready", "stopping", "stopped", "crashed"}[s]
}

// Server is a running llama-server owned by visor.
type Server struct {
	cfg    Config
	cmd    *exec.Cmd
	url    string
	log    *logRing
	place  placementLog
	logger *slog.Logger
	file   *os.File

	exited  chan struct{} // closed when the process has exited and its output is drained
	waitErr error

	mu       sync.Mutex
	state    State
	stopping bool
}

// ExitError reports a server that exited on its own, with the log lines that explain why.
type ExitError struct {
	Binary   string
	Err      error // from Wait
	Reason   []string
	LogFile  string
	WhileRun bool // exited after it was ready
}

func (e *ExitError) Error() string {
	when := "while starting"
	if e.WhileRun {
		when = "while running"
	}
	status := fmt.Sprint(e.Err)
	if e.Err == nil {
		// A clean exit before it served anything is not llama-server behaving as a server at all.
		status = "status 0"
		if !e.WhileRun {
			status += fmt.Sprintf("; is %s llama-server? give the llama-server binary with --server or VISOR_LLAMA_SERVER", e.Binary)
		}
	}
	msg := fmt.Sprintf("llama-server exited %s (%s)", when, status)
	if len(e.Reason) > 0 {
		msg += ":\n  " + strings.Join(e.Reason, "\n  ")
	}
	if e.LogFile != "" {
		msg += "\nfull log: " + e.LogFile
	}
	return msg
}

func (e *ExitError) Unwrap() error { return e.Err }

// Start launches llama-server and waits until /health says it is ready. On failure the process is gone and the
// error carries the log lines that explain it.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := Find(cfg.Binary)
	if err != nil {
		return nil, err
	}
	cfg.Binary = bin
	if err := CheckExtraArgs(cfg.ExtraArgs); err != nil {
		return nil, err
	}
	model, mmproj, err := cfg.files()
	if err != nil {
		return nil, err
	}
	// Checked here because llama-server's own message for a missing file is buried in its log, and because a
	// FIFO or a device given as the model would block llama-server's open (and visor waiting on it) for good.
	for _, f := range []struct{ what, path string }{{"model", model}, {"mmproj", mmproj}} {
		if f.path == "" {
			continue
		}
		if _, err := safefile.Check(f.path); err != nil {
			return nil, fmt.Errorf("llamacpp: %s file: %w", f.what, err)
		}
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := cfg.Port
	if port == 0 {
		if port, err = FreePort(host); err != nil {
			return nil, err
		}
	} else if err := CheckPortFree(host, port); err != nil {
		// Whatever answers there would pass the health check as if it were the server started here.
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Host, cfg.Port = host, port // kept so Restart comes back at the same address
	s := &Server{cfg: cfg, url: "http://" + net.JoinHostPort(host, strconv.Itoa(port)), logger: logger,
		exited: make(chan struct{})}
	if cfg.LogFile != "" {
		if s.file, err = os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return nil, fmt.Errorf("llamacpp: log file: %w", err)
		}
	}
	onLog := func(line string) {
		s.place.observe(line)
		if cfg.OnLog != nil {
			cfg.OnLog(line)
		}
	}
	s.log = newLogRing(400, s.file, onLog)

	cmd := exec.Command(bin, cfg.CommandLine(host, port)...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	// Own process group so Stop reaches every child; Pdeathsig so the server dies with visor even on SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	drained := make(chan struct{})
	go s.log.consume(pr, func() { close(drained) })
	s.notify(StateStarting)
	logger.Info("starting llama-server", "bin", bin, "args", cmd.Args[1:])
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		s.closeFile()
		return nil, fmt.Errorf("llamacpp: start %s: %w", bin, err)
	}
	s.cmd = cmd
	logger.Info("llama-server started", "pid", cmd.Process.Pid, "url", s.url)
	go func() {
		s.waitErr = cmd.Wait()
		_ = pw.Close()
		<-drained
		s.mu.Lock()
		if s.stopping {
			s.state = StateStopped
		} else {
			s.state = StateCrashed
		}
		st := s.state
		s.mu.Unlock()
		s.closeFile()
		close(s.exited)
		s.notify(st)
		logger.Info("llama-server exited", "state", st, "err", s.waitErr)
	}()

	wait := cfg.Ready
	if wait == 0 {
		wait = 5 * time.Minute
	}
	if err := s.waitReady(ctx, wait); err != nil {
		_ = s.Stop(context.Background())
		return nil, err
	}
	return s, nil
}

// files returns the model and projector files cfg would load, from the typed fields or from Args. Setting both
// Args and a typed field it would duplicate is an error, because one of them would be silently ignored.
func (c Config) files() (model, mmproj string, err error) {
	if len(c.Args) == 0 {
		if c.Model == "" {
			return "", "", errors.New("llamacpp: no model given: set Config.Model (--model FILE.gguf)")
		}
		return c.Model, c.MMProj, nil
	}
	typed := []struct {
		name string
		set  bool
	}{{"Model", c.Model != ""}, {"MMProj", c.MMProj != ""}, {"Ctx", c.Ctx != 0}, {"CacheTypeK", c.CacheTypeK != ""},
		{"CacheTypeV", c.CacheTypeV != ""}, {"SpecType", c.SpecType != ""}, {"Parallel", c.Parallel != 0},
		{"GPULayers", c.GPULayers != ""}}
	for _, f := range typed {
		if f.set {
			return "", "", fmt.Errorf("llamacpp: Config.%s is set together with Config.Args (%s): "+
				"put it in Args or leave Args empty", f.name, strings.Join(c.Args, " "))
		}
	}
	hasModel := false
	for i, a := range c.Args {
		switch a {
		case "-m", "--model", "--mmproj", "-hf", "-hfr", "--hf-repo", "-mu", "--model-url":
		default:
			continue
		}
		if i+1 >= len(c.Args) {
			return "", "", fmt.Errorf("llamacpp: Config.Args ends with %s but no value: %s", a, strings.Join(c.Args, " "))
		}
		switch a {
		case "-m", "--model":
			model = c.Args[i+1]
		case "--mmproj":
			mmproj = c.Args[i+1]
		}
		hasModel = hasModel || a != "--mmproj"
	}
	if !hasModel {
		return "", "", fmt.Errorf("llamacpp: Config.Args name no model (-m FILE.gguf): %s", strings.Join(c.Args, " "))
	}
	return model, mmproj, nil
}

func (s *Server) closeFile() {
	if s.file != nil {
		_ = s.file.Close()
	}
}

// CheckPortFree reports a port on host that something already listens on, naming it and the fix.
func CheckPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("llamacpp: port %d on %s is in use (%w): stop what listens there, or give another port", port, host, err)
	}
	_ = l.Close()
	return nil
}

// FreePort is a TCP port on host that nothing listens on now, for a server to be started there.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("llamacpp: find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	delay := healthPoll(0, 0)
	for {
		status, err := health(ctx, hc, s.url)
		switch {
		case err == nil && status == http.StatusOK:
			s.setState(StateReady)
			return nil
		case err == nil && status == http.StatusServiceUnavailable:
			s.setState(StateLoading)
		}
		select {
		case <-s.exited:
			return s.exitError(false)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("llama-server at %s not ready after %s (last log: %s): %w", s.url, limit,
					strings.Join(s.log.tail(3), " | "), ctx.Err())
			}
			return fmt.Errorf("waiting for llama-server: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = healthPoll(time.Since(start), delay)
	}
}

// healthPoll is the wait before the next /health check, after waiting elapsed with the last wait prev: every 20 ms
// for the first 2 s, since a small model is ready in a fraction of a second and a gateway's swap waits for this
// check (backing off from 20 ms at once left a 150 ms load waiting until 300 ms), then doubling up to 250 ms for a
// large model's minutes of loading.
func healthPoll(elapsed, prev time.Duration) time.Duration {
	const first, fine, most = 20 * time.Millisecond, 2 * time.Second, 250 * time.Millisecond
	if elapsed < fine || prev < first {
		return first
	}
	return min(prev*2, most)
}

func health(ctx context.Context, hc *http.Client, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *Server) exitError(running bool) error {
	return &ExitError{Binary: s.cfg.Binary, Err: s.waitErr, Reason: explain(s.log.tail(0)), LogFile: s.cfg.LogFile,
		WhileRun: running}
}

func (s *Server) setState(st State) {
	s.mu.Lock()
	changed := s.state != st
	s.state = st
	s.mu.Unlock()
	if changed {
		s.notify(st)
	}
}

func (s *Server) notify(st State) {
	if s.cfg.OnState != nil {
		s.cfg.OnState(st)
	}
}

// URL is the server's root URL.
func (s *Server) URL() string { return s.url }

// Client returns an API client for this server.
func (s *Server) Client() *engine.Client { return engine.NewClient(s.url, "") }

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// State reports the current lifecycle state.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Done is closed when the process has exited, for whatever reason.
func (s *Server) Done() <-chan struct{} { return s.exited }

// Err returns nil while the server runs or after a requested stop, and an *ExitError after a crash.
func (s *Server) Err() error {
	select {
	case <-s.exited:
	default:
		return nil
	}
	if s.State() == StateStopped {
		return nil
	}
	return s.exitError(true)
}

// Placement is where the server put the model and the vision encoder, from its load log.
func (s *Server) Placement() Placement { return s.place.get() }

// Args are the arguments the server was started with (the binary left out), for telling apart what changes its
// speed (engine/swap.FlagsKey).
func (s *Server) Args() []string { return append([]string(nil), s.cmd.Args[1:]...) }

// Binary is the llama-server executable this server runs.
func (s *Server) Binary() string { return s.cfg.Binary }

// LogTail returns the last n lines the server printed.
func (s *Server) LogTail(n int) []string { return s.log.tail(n) }

// Stop asks the server to exit (SIGTERM to its process group), and kills the group if it has not exited when ctx
// ends or after 10 seconds, whichever is first.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	select {
	case <-s.exited:
		s.mu.Unlock()
		return nil
	default:
	}
	s.stopping = true
	s.state = StateStopping
	s.mu.Unlock()
	s.notify(StateStopping)
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	s.logger.Warn("llama-server ignored SIGTERM; killing it", "pid", pgid)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.exited
	return nil
}

// Restart stops the server if it still runs and starts it again with the same configuration at the same address,
// so clients made before keep working. After a crash it is how a long-lived visor (chat, serve) recovers.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	if err := s.Stop(ctx); err != nil {
		return nil, err
	}
	s.logger.Info("restarting llama-server", "url", s.url)
	return Start(ctx, s.cfg)
}

// Kill ends the process group at once, as a crash would. Tests use it; users want Stop.
func (s *Server) Kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// decodeJSON is shared by the capability readers.
func decodeJSON(b []byte, out any) error { return json.Unmarshal(b, out) }
