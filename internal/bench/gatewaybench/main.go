// Command gatewaybench measures what `visor gateway` adds to llama-server, beside llama-swap, in one run: the same
// requests to a raw llama-server, to the gateway and to llama-swap, each proxying to a llama-server of its own
// started with the gateway's engine arguments, on visor's tiny generated model. It is a development tool (not part of
// the visor binary) for the gateway's overhead and concurrency figures (issue #26):
//
//	go build -o /tmp/gwbench/visor ./cmd/visor
//	go run ./internal/bench/gatewaybench -visor /tmp/gwbench/visor -llama-swap /tmp/llama-swap -out DIR
//
// Phases, all in one run: sequential requests interleaved across the three targets (rotating which goes first),
// non-streamed total time and streamed time to first token and total, reported as medians and as ratios to raw
// llama-server; each proxy's CPU time per request over that phase (from /proc, its own threads, not its engine's);
// then 50 concurrent clients sending N requests each (streamed and not, alternating) to one target at a time:
// answered, 429s, other errors, lost (no complete answer) and the latency percentiles; then swaps by name between
// two models (gateway and llama-swap). The raw samples go to DIR as CSV, the table to DIR/table.txt.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/visorhq/visor/internal/testmodel"
)

type target struct {
	name  string
	base  string // http://host:port
	model string
	pid   int // the proxy's process (0 for raw llama-server)
}

type sample struct {
	phase             string // sequential, concurrent
	target            string
	rep               int
	kind              string // plain, stream
	total, ttft       time.Duration
	status            int
	err               string
	concurrent, order int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
}

func run() error {
	home, _ := os.UserHomeDir()
	visor := flag.String("visor", "", "the visor binary to measure (go build -o /tmp/gwbench/visor ./cmd/visor)")
	swap := flag.String("llama-swap", "", "the llama-swap binary (built from its source)")
	server := flag.String("server", filepath.Join(home, ".cache/visor/engine/bin/llama-server"), "the llama-server all three use")
	out := flag.String("out", "", "folder for the raw samples and the table")
	reps := flag.Int("reps", 100, "sequential repetitions per cell")
	clients := flag.Int("clients", 50, "concurrent clients")
	per := flag.Int("per", 12, "requests per concurrent client")
	swaps := flag.Int("swaps", 20, "swaps by name per proxy (0: none)")
	threads := flag.Int("threads", 1, "llama-server threads (-t)")
	parallel := flag.Int("parallel", 1, "llama-server slots (-np)")
	flag.Parse()
	if *visor == "" || *swap == "" || *out == "" {
		return errors.New("give -visor BINARY, -llama-swap BINARY and -out DIR")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gatewaybench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	chat, _, err := testmodel.Files(tmp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			}
		}
	}()
	start := func(logName string, env []string, name string, args ...string) (*exec.Cmd, error) {
		f, err := os.Create(filepath.Join(*out, logName))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.Env = append(os.Environ(), env...)
		// Own process group, so the engines a proxy started are stopped with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		procs = append(procs, cmd)
		return cmd, nil
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * *clients, DisableCompression: true}}

	// The gateway first: its engine's arguments are the ones the other two servers get.
	gwPort, err := freePort()
	if err != nil {
		return err
	}
	engineArgs := []string{"-t", strconv.Itoa(*threads), "--poll", "0"}
	yamlArgs := `[` + strings.Join(quoteAll(engineArgs), ", ") + `]`
	gwCfg := filepath.Join(tmp, "models.yaml")
	m := fmt.Sprintf("{model: %s, ctx: 4096, parallel: %d, args: %s}", chat, *parallel, yamlArgs)
	if err := os.WriteFile(gwCfg, []byte("preload: [tiny]\nmodels:\n  tiny: "+m+"\n  tiny2: "+m+"\n"), 0o644); err != nil {
		return err
	}
	gw, err := start("gateway.log", []string{"VISOR_LLAMA_SERVER=" + *server, "VISOR_ENGINE_DIR=" + filepath.Join(tmp, "engine"), "VISOR_SERVER_ARGS="},
		*visor, "gateway", "--config", gwCfg, "--addr", fmt.Sprintf("127.0.0.1:%d", gwPort))
	if err != nil {
		return err
	}
	gwBase := fmt.Sprintf("http://127.0.0.1:%d", gwPort)
	if err := waitHealth(ctx, hc, gwBase+"/health", 2*time.Minute); err != nil {
		return fmt.Errorf("visor gateway: %w (see %s)", err, filepath.Join(*out, "gateway.log"))
	}
	args, err := engineCommand(gw.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("engine arguments (from the gateway's llama-server): %s\n", strings.Join(args, " "))

	rawPort, err := freePort()
	if err != nil {
		return err
	}
	if _, err := start("raw-llama-server.log", nil, *server, append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(rawPort)}, args...)...); err != nil {
		return err
	}
	rawBase := fmt.Sprintf("http://127.0.0.1:%d", rawPort)
	if err := waitHealth(ctx, hc, rawBase+"/health", 2*time.Minute); err != nil {
		return fmt.Errorf("raw llama-server: %w", err)
	}

	lsPort, err := freePort()
	if err != nil {
		return err
	}
	lsStart, err := freePort()
	if err != nil {
		return err
	}
	lsCmd := *server + " --host 127.0.0.1 --port ${PORT} " + strings.Join(args, " ")
	lsCfg := filepath.Join(tmp, "llama-swap.yaml")
	if err := os.WriteFile(lsCfg, []byte(fmt.Sprintf("startPort: %d\nmodels:\n  tiny:\n    cmd: %s\n  tiny2:\n    cmd: %s\n",
		lsStart, lsCmd, lsCmd)), 0o644); err != nil {
		return err
	}
	ls, err := start("llama-swap.log", nil, *swap, "-config", lsCfg, "-listen", fmt.Sprintf("127.0.0.1:%d", lsPort))
	if err != nil {
		return err
	}
	lsBase := fmt.Sprintf("http://127.0.0.1:%d", lsPort)
	if err := waitHealth(ctx, hc, lsBase+"/health", time.Minute); err != nil {
		return fmt.Errorf("llama-swap: %w", err)
	}

	targets := []target{{"raw", rawBase, "tiny", 0}, {"gateway", gwBase, "tiny", gw.Process.Pid}, {"llama-swap", lsBase, "tiny", ls.Process.Pid}}
	// Warm-up: llama-swap loads its model on the first request; every path fills its connections and caches.
	for _, t := range targets {
		for range 5 {
			for _, stream := range []bool{false, true} {
				if s := request(ctx, hc, t, stream, 2*time.Minute); s.err != "" || s.status != 200 {
					return fmt.Errorf("warm-up of %s: HTTP %d %s", t.name, s.status, s.err)
				}
			}
		}
	}

	// Sequential, interleaved: each repetition sends a plain and a streamed request to each target, the order
	// rotating through all six permutations so a change in the machine's load hits the three alike.
	perms := [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}, {1, 0, 2}, {0, 2, 1}}
	cpu0 := map[string]time.Duration{}
	for _, t := range targets {
		cpu0[t.name] = cpuTime(t.pid)
	}
	t0 := time.Now()
	var seq []sample
	for rep := range *reps {
		for i, ti := range perms[rep%len(perms)] {
			for _, stream := range []bool{false, true} {
				s := request(ctx, hc, targets[ti], stream, time.Minute)
				s.phase, s.rep, s.order = "sequential", rep, i
				seq = append(seq, s)
			}
		}
	}
	seqWall := time.Since(t0)
	cpuPer := map[string]time.Duration{}
	for _, t := range targets {
		if t.pid != 0 {
			cpuPer[t.name] = (cpuTime(t.pid) - cpu0[t.name]) / time.Duration(2**reps)
		}
	}
	// The proxies' CPU when idle over as long, so their own background work can be told apart.
	idle0 := map[string]time.Duration{}
	for _, t := range targets {
		idle0[t.name] = cpuTime(t.pid)
	}
	time.Sleep(min(seqWall, 20*time.Second))
	idleWall := min(seqWall, 20*time.Second)
	idlePer := map[string]time.Duration{}
	for _, t := range targets {
		if t.pid != 0 {
			idle := (cpuTime(t.pid) - idle0[t.name]) * time.Duration(seqWall) / time.Duration(idleWall)
			idlePer[t.name] = idle / time.Duration(2**reps)
		}
	}

	// Concurrent: one target at a time, every client sending its requests back to back.
	hc.CloseIdleConnections()
	var conc []sample
	wall := map[string]time.Duration{}
	for _, t := range targets {
		var mu sync.Mutex
		var wg sync.WaitGroup
		c0 := time.Now()
		for c := range *clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range *per {
					s := request(ctx, hc, t, (c+i)%2 == 1, 2*time.Minute)
					s.phase, s.concurrent = "concurrent", c
					mu.Lock()
					conc = append(conc, s)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		wall[t.name] = time.Since(c0)
		hc.CloseIdleConnections()
	}

	// Swaps by name: alternate the two models; each request's time includes stopping one engine and loading the
	// other.
	swapTimes := map[string][]time.Duration{}
	for _, t := range targets[1:] {
		for i := range *swaps {
			tt := t
			tt.model = []string{"tiny2", "tiny"}[i%2]
			s := request(ctx, hc, tt, false, 2*time.Minute)
			if s.err != "" || s.status != 200 {
				return fmt.Errorf("swap %d on %s: HTTP %d %s", i, t.name, s.status, s.err)
			}
			swapTimes[t.name] = append(swapTimes[t.name], s.total)
		}
	}

	table := report(targets, seq, conc, cpuPer, idlePer, wall, swapTimes, *reps, *clients, *per)
	fmt.Print(table)
	if err := os.WriteFile(filepath.Join(*out, "table.txt"), []byte(table), 0o644); err != nil {
		return err
	}
	return writeCSV(filepath.Join(*out, "samples.csv"), append(seq, conc...), filepath.Join(*out, "swaps.csv"), swapTimes)
}

func quoteAll(a []string) []string {
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = strconv.Quote(s)
	}
	return q
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitHealth(ctx context.Context, hc *http.Client, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer 200 within %s", url, limit)
}

// engineCommand returns the arguments of the llama-server the gateway (pid) started, without --host and --port.
func engineCommand(pid int) ([]string, error) {
	for _, d := range descendants(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d))
		if err != nil {
			continue
		}
		a := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		for i, w := range a {
			if w != "--host" {
				continue
			}
			var args []string
			rest := a[i:]
			for j := 0; j < len(rest); j++ {
				if (rest[j] == "--host" || rest[j] == "--port") && j+1 < len(rest) {
					j++
					continue
				}
				args = append(args, rest[j])
			}
			return args, nil
		}
	}
	return nil, fmt.Errorf("no llama-server among the gateway's (pid %d) processes", pid)
}

func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 {
			pp, _ := strconv.Atoi(f[1])
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

// cpuTime is the process's own user and system time (all its threads, not its children's).
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	// After the name: state(0) ppid(1) ... utime(11) stime(12), in clock ticks of 1/100 s.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

const body = `{"model":%q,"stream":%t,"max_tokens":32,"ignore_eos":true,"temperature":0,"messages":[{"role":"user","content":"hello"}]}`

// request sends one chat request and times it. A plain answer counts when it is a 200 with a message; a
// streamed one when it is a 200 whose stream brought content and ended with [DONE]. Anything else that is not an
// HTTP status is recorded in err (lost).
func request(ctx context.Context, hc *http.Client, t target, stream bool, limit time.Duration) sample {
	s := sample{target: t.name, kind: "plain"}
	if stream {
		s.kind = "stream"
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "POST", t.base+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(body, t.model, stream)))
	req.Header.Set("Content-Type", "application/json")
	// A server may close a kept-alive connection just as the next request goes out on it; marking the request
	// idempotent lets net/http resend it on a fresh one in exactly that case, as the SDKs retry (the header is
	// not sent with a nil value). The proxies' own connections to their engines get no such help.
	req.Header["X-Idempotency-Key"] = nil
	resp, err := hc.Do(req)
	if err != nil {
		s.err = err.Error()
		return s
	}
	defer resp.Body.Close()
	s.status = resp.StatusCode
	if resp.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, resp.Body)
		s.total = time.Since(start)
		return s
	}
	if !stream {
		var r struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) == 0 || r.Choices[0].Message.Content == "" {
			s.err = fmt.Sprintf("no message in the answer (%v)", err)
		}
		s.total = time.Since(start)
		return s
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	done := false
	for sc.Scan() {
		l := sc.Text()
		if s.ttft == 0 && strings.HasPrefix(l, "data: ") && strings.Contains(l, `"content":"`) {
			s.ttft = time.Since(start)
		}
		if l == "data: [DONE]" {
			done = true
		}
	}
	s.total = time.Since(start)
	switch {
	case sc.Err() != nil:
		s.err = sc.Err().Error()
	case !done || s.ttft == 0:
		s.err = fmt.Sprintf("incomplete stream (done %v, content %v)", done, s.ttft != 0)
	}
	return s
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), d...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(p * float64(len(c)-1))
	return c[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

func report(targets []target, seq, conc []sample, cpuPer, idlePer, wall map[string]time.Duration, swaps map[string][]time.Duration, reps, clients, per int) string {
	var b strings.Builder
	cell := func(t, kind string, ttft bool) (all []time.Duration, bad int) {
		for _, s := range seq {
			if s.target != t || s.kind != kind {
				continue
			}
			if s.err != "" || s.status != 200 {
				bad++
				continue
			}
			if ttft {
				all = append(all, s.ttft)
			} else {
				all = append(all, s.total)
			}
		}
		return all, bad
	}
	// perRep is each repetition's ratio of t to raw, so a burst of other work on the machine lands in one pair.
	perRep := func(t, kind string, ttft bool) []float64 {
		by := map[string]map[int]time.Duration{}
		for _, s := range seq {
			if s.kind != kind || s.err != "" || s.status != 200 {
				continue
			}
			if by[s.target] == nil {
				by[s.target] = map[int]time.Duration{}
			}
			v := s.total
			if ttft {
				v = s.ttft
			}
			by[s.target][s.rep] = v
		}
		var r []float64
		for rep, v := range by[t] {
			if raw, ok := by["raw"][rep]; ok && raw > 0 {
				r = append(r, float64(v)/float64(raw))
			}
		}
		sort.Float64s(r)
		return r
	}
	fmt.Fprintf(&b, "sequential, interleaved: %d repetitions per cell (tiny model, 32 tokens, ms)\n", reps)
	fmt.Fprintf(&b, "%-11s %-22s %9s %9s %9s %11s %11s %6s\n", "target", "cell", "p50", "p90", "mean", "p50/raw", "pair-ratio", "failed")
	for _, c := range []struct {
		kind, name string
		ttft       bool
	}{{"plain", "non-streamed total", false}, {"stream", "streamed TTFT", true}, {"stream", "streamed total", false}} {
		raw, _ := cell("raw", c.kind, c.ttft)
		for _, t := range targets {
			d, bad := cell(t.name, c.kind, c.ttft)
			var sum time.Duration
			for _, x := range d {
				sum += x
			}
			mean := time.Duration(0)
			if len(d) > 0 {
				mean = sum / time.Duration(len(d))
			}
			ratio, pair := "", ""
			if t.name != "raw" && len(raw) > 0 {
				ratio = fmt.Sprintf("%.3f", float64(pct(d, .5))/float64(pct(raw, .5)))
				if r := perRep(t.name, c.kind, c.ttft); len(r) > 0 {
					pair = fmt.Sprintf("%.3f", r[len(r)/2])
				}
			}
			fmt.Fprintf(&b, "%-11s %-22s %9s %9s %9s %11s %11s %6d\n", t.name, c.name, ms(pct(d, .5)), ms(pct(d, .9)), ms(mean), ratio, pair, bad)
		}
	}
	fmt.Fprintf(&b, "\nproxy CPU per request over the sequential phase (its own process, /proc utime+stime, 10 ms ticks; idle: its CPU over as long with no request, per request)\n")
	for _, t := range targets[1:] {
		fmt.Fprintf(&b, "%-11s %8.0f µs/request (idle share %.0f µs)\n", t.name, float64(cpuPer[t.name].Microseconds()), float64(idlePer[t.name].Microseconds()))
	}
	fmt.Fprintf(&b, "\nconcurrent: %d clients × %d requests each (streamed and plain alternating), one target at a time\n", clients, per)
	fmt.Fprintf(&b, "%-11s %6s %6s %6s %6s %6s %9s %9s %9s\n", "target", "sent", "ok", "429", "errors", "lost", "p50 ms", "p99 ms", "wall s")
	for _, t := range targets {
		var ok []time.Duration
		n, n429, nerr, lost := 0, 0, 0, 0
		var why []string
		for _, s := range conc {
			if s.target != t.name {
				continue
			}
			n++
			switch {
			case s.err != "":
				lost++
				if len(why) < 3 {
					why = append(why, s.err)
				}
			case s.status == 429:
				n429++
			case s.status != 200:
				nerr++
			default:
				ok = append(ok, s.total)
			}
		}
		fmt.Fprintf(&b, "%-11s %6d %6d %6d %6d %6d %9s %9s %9.1f\n", t.name, n, len(ok), n429, nerr, lost, ms(pct(ok, .5)), ms(pct(ok, .99)), wall[t.name].Seconds())
		for _, w := range why {
			fmt.Fprintf(&b, "            lost: %s\n", w)
		}
	}
	if len(swaps) > 0 {
		fmt.Fprintf(&b, "\nswap by name (a request for the other model: stop one engine, load the other, answer)\n")
		for _, t := range targets[1:] {
			d := swaps[t.name]
			fmt.Fprintf(&b, "%-11s %3d swaps  p50 %s ms  min %s ms  max %s ms\n", t.name, len(d), ms(pct(d, .5)), ms(pct(d, 0)), ms(pct(d, 1)))
		}
	}
	return b.String()
}

func writeCSV(path string, samples []sample, swapPath string, swaps map[string][]time.Duration) error {
	var b strings.Builder
	b.WriteString("phase,target,rep_or_client,order,kind,status,total_ms,ttft_ms,err\n")
	for _, s := range samples {
		who := s.rep
		if s.phase == "concurrent" {
			who = s.concurrent
		}
		fmt.Fprintf(&b, "%s,%s,%d,%d,%s,%d,%s,%s,%q\n", s.phase, s.target, who, s.order, s.kind, s.status, ms(s.total), ms(s.ttft), s.err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("proxy,i,total_ms\n")
	for name, d := range swaps {
		for i, x := range d {
			fmt.Fprintf(&b, "%s,%d,%s\n", name, i, ms(x))
		}
	}
	return os.WriteFile(swapPath, []byte(b.String()), 0o644)
}
