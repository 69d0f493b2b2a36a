package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/visorhq/visor/internal/safefile"
)

// What run_shell lets the model start, and with which arguments. The rule, in full:
//
//  1. The program is a bare name on the user's allowlist, looked up in PATH with every relative entry and every
//     entry inside the workspace removed, so a program the model planted in the workspace never runs. A path
//     ("/bin/ls") is not a name; the allowlist refuses it when it is configured (BuiltinConfig.Check).
//  2. Launchers, programs whose arguments name another program or code to run (env, timeout, xargs, sudo,
//     ssh, sh, python, awk, sed…), would turn the allowlist into "anything": they run only when the user names
//     them on purpose in BuiltinConfig.ShellLaunchers, not merely in Shell.
//  3. Options that make an ordinary program run another one are refused: find -exec/-execdir/-ok/-okdir,
//     git -c/--config-env/--exec-path/--upload-pack/--receive-pack/-u/--exec/--template/-O, git config (other
//     than reading), git submodule foreach, git bisect run, git difftool/mergetool/filter-branch/send-email,
//     git rebase -x/--exec, ext:: URLs, tar --to-command/-I/--checkpoint-action/-F, rsync -e/--rsync-path,
//     zip -TT, sort --compress-program, rg --pre, wget --use-askpass/-e, man -P, gcc/clang -wrapper/-fplugin/-B/
//     -specs, go -exec/-toolexec/-vettool, go env -w/-u and go clean -cache/-modcache (which reach outside the
//     workspace), git maintenance. Options that follow symlinks in a recursive walk are refused too (find -L,
//     grep -R, rg -L, cp -L, tar -h, rsync -L…): a link in the workspace may point outside. Abbreviated long
//     options (--to-comm) and go's --exec count as the option. A program listed in ShellLaunchers keeps all of
//     these. find -delete is allowed: without -L it deletes only below its starting points, which rule 4
//     confines.
//  4. Every argument that may be a path (the whole word, the value after "=", the value glued to a short option
//     as in -o../x, the rest after "@" or "file://") is resolved against the working directory, symlinks
//     included, and must stay inside the workspace; /dev/null is the one outside path allowed. Since run_shell
//     cannot tell a read from a write, a path into a protected name (.git, .vscode, .envrc, …) is refused too,
//     unless AllowProtected lists it.
//  5. The child gets a clean environment (shellEnv): none of visor's variables, keys or tokens; git in it finds no
//     bare repository by walking up and runs no fsmonitor (gitEnv). git --git-dir and --work-tree are refused, and
//     a path argument or working directory inside a folder shaped like a git directory (HEAD beside objects/ or
//     refs/), or that would make one, is refused unless AllowProtected lists .git. A path argument naming a file
//     with more than one hard link is refused, as read_file refuses it.
//
// What it cannot see: a program that runs code from files in the workspace runs whatever the model wrote there
// (make and its Makefile, go test, npm run, cargo, pytest), and what a program does with a file's content
// (the members of an archive, zip following links it archives) is beyond the arguments checked here. Allowing such a program trusts the model with
// everything the user can do; the confinement above keeps an ordinary program (ls, cat, grep, git status) from
// being that.
var launchers = map[string]string{}

func init() {
	for _, n := range strings.Fields(`env timeout nice nohup xargs sudo doas su runuser pkexec setsid stdbuf
		time watch chroot strace ltrace gdb lldb valgrind busybox unshare nsenter flock taskset ionice chrt script
		parallel sg newgrp systemd-run at batch firejail bwrap nsjail exec command eval ssh scp sftp
		docker podman kubectl npx pnpx bunx uvx pipx toybox run-parts start-stop-daemon tmux screen entr unbuffer
		catchsegv fakeroot proot eatmydata numactl prlimit cgexec ldd dbus-launch xdg-open open`) {
		launchers[n] = "runs the program its arguments name"
	}
	for _, n := range strings.Fields(`sh bash dash zsh ksh mksh fish csh tcsh ash python python2 python3 pypy
		pypy3 perl ruby irb node nodejs deno bun php lua luajit tclsh wish Rscript julia osascript pwsh
		powershell expect awk gawk mawk nawk sed gsed vim vi nvim ex emacs`) {
		launchers[n] = "runs the code its arguments give"
	}
}

// execOptions are the options of ordinary programs that run another program. A short option (one dash, one
// letter) also matches when clustered (-ave) or glued to its value (-Iprog); a long one with "=value".
var execOptions = map[string][]string{
	"find":  {"-exec", "-execdir", "-ok", "-okdir"},
	"tar":   {"--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script", "-F", "--new-volume-script", "--rmt-command", "--rsh-command"},
	"rsync": {"-e", "--rsh", "--rsync-path"},
	"zip":   {"-TT", "--unzip-command"},
	"sort":  {"--compress-program"},
	"rg":    {"--pre"},
	"wget":  {"--use-askpass", "-e", "--execute"},
	"man":   {"-P", "--pager", "-H", "--html"},
	"go":    {"-exec", "-toolexec", "-vettool"},
	"gcc":   gccExec, "cc": gccExec, "g++": gccExec, "c++": gccExec, "clang": gccExec, "clang++": gccExec,
	// git's global options, before the subcommand; the subcommands' own are in gitSubOptions.
	"git": {"-c", "--config-env", "--exec-path", "--config"},
}

// gccExec are the compiler options that run or load a program of the model's choosing.
var gccExec = []string{"-wrapper", "-fplugin", "-fpass-plugin", "-B", "-specs", "--specs", "-Xclang"}

// followOptions make a recursive program follow symlinks, which may lead out of the workspace: find -L . -delete
// deletes outside files through a link to a folder, grep -R reads them. The default, non-following forms stay.
var followOptions = map[string][]string{
	"find":  {"-L", "-H", "-follow"},
	"grep":  {"-R", "--dereference-recursive"},
	"rg":    {"-L", "--follow"},
	"cp":    {"-L", "--dereference", "-H"},
	"tar":   {"-h", "--dereference"},
	"rsync": {"-L", "--copy-links", "--copy-unsafe-links", "-k", "--copy-dirlinks", "-K", "--keep-dirlinks"},
	"du":    {"-L", "--dereference"},
	"ls":    {"-L", "--dereference"},
	"chmod": {"-L"}, "chown": {"-L"}, "chgrp": {"-L"},
}

var gitSubOptions = map[string][]string{
	"clone":     {"-u", "--upload-pack", "--template", "-c", "--config"},
	"fetch":     {"--upload-pack"},
	"pull":      {"--upload-pack"},
	"ls-remote": {"-u", "--upload-pack"},
	"archive":   {"--exec"},
	"push":      {"--receive-pack", "--exec"},
	"remote":    {"--upload-pack"},
	"grep":      {"-O", "--open-files-in-pager"},
	"rebase":    {"-x", "--exec"},
	"init":      {"--template"},
}

// gitRefused are git subcommands that exist to run other programs or to change configuration (which can).
var gitRefused = map[string]string{
	"filter-branch": "runs the filters its arguments give",
	"difftool":      "runs a diff program",
	"mergetool":     "runs a merge program",
	"send-email":    "runs a mail program",
	"instaweb":      "runs a web server",
	"web--browse":   "runs a browser",
	"daemon":        "serves the repository",
	"credential":    "reads stored credentials",
	"maintenance":   "schedules background jobs outside the workspace",
}

// errShellPolicy marks refusals of the policy; the model reads them as they are.
var errShellPolicy = errors.New("refused")

// checkProgram applies rules 2 and 3 to argv.
func checkProgram(argv []string, launchersAllowed []string) error {
	name := argv[0]
	if why, ok := launchers[name]; ok {
		if !slices.Contains(launchersAllowed, name) {
			return fmt.Errorf("%w: %s %s, which would escape the allowlist; it runs only if the user allows it on "+
				"purpose as a launcher (allow_shell_launchers in an agent file, --allow-shell-launcher on the command line)",
				errShellPolicy, name, why)
		}
		return nil
	}
	if slices.Contains(launchersAllowed, name) {
		return nil
	}
	args := argv[1:]
	if opt := matchOption(args, execOptions[name]); opt != "" && name != "git" {
		return refuseOption(name, opt)
	}
	if opt := matchOption(args, followOptions[name]); opt != "" {
		return fmt.Errorf("%w: %s %s follows symlinks, which may lead outside the workspace; use the form that "+
			"does not follow them (grep -r, not -R; find without -L)", errShellPolicy, name, opt)
	}
	switch name {
	case "git":
		return checkGit(args)
	case "go":
		if len(args) > 0 && args[0] == "env" && matchOption(args[1:], []string{"-w", "-u"}) != "" {
			return fmt.Errorf("%w: go env -w and -u change the user's Go settings outside the workspace", errShellPolicy)
		}
		if len(args) > 0 && args[0] == "clean" && matchOption(args[1:], []string{"-cache", "-modcache", "-fuzzcache", "-testcache"}) != "" {
			return fmt.Errorf("%w: go clean's cache options delete the user's caches outside the workspace", errShellPolicy)
		}
	}
	return nil
}

func refuseOption(prog, opt string) error {
	return fmt.Errorf("%w: %s %s runs another program, which would escape the allowlist; do without it",
		errShellPolicy, prog, opt)
}

func checkGit(args []string) error {
	// Global options come before the subcommand; -C, --git-dir and the like take a value.
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a := args[i]
		if opt := matchOption([]string{a}, execOptions["git"]); opt != "" {
			return refuseOption("git", opt)
		}
		// They make any folder the repository, whatever its name, and its config runs programs (core.fsmonitor).
		if opt := matchOption([]string{a}, []string{"--git-dir", "--work-tree"}); opt != "" {
			return fmt.Errorf("%w: git %s points git at another repository, whose configuration may run programs; "+
				"run git in the workspace's own repository (the dir argument chooses the folder)", errShellPolicy, opt)
		}
		switch a {
		case "-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds", "--attr-source":
			i++
		}
	}
	for _, a := range args {
		if strings.HasPrefix(strings.ToLower(a), "ext::") || strings.Contains(strings.ToLower(a), "::ext::") {
			return fmt.Errorf("%w: git's ext:: transport runs a program", errShellPolicy)
		}
	}
	if i >= len(args) {
		return nil
	}
	sub, rest := args[i], args[i+1:]
	if why, ok := gitRefused[sub]; ok || strings.HasPrefix(sub, "credential-") {
		if !ok {
			why = gitRefused["credential"]
		}
		return fmt.Errorf("%w: git %s %s", errShellPolicy, sub, why)
	}
	if opt := matchOption(rest, gitSubOptions[sub]); opt != "" {
		return refuseOption("git "+sub, opt)
	}
	switch sub {
	case "config":
		if len(rest) > 0 && slices.Contains([]string{"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}, rest[0]) &&
			matchOption(rest, []string{"--global", "--system", "--file", "-f", "--edit", "-e"}) == "" {
			return nil
		}
		return fmt.Errorf("%w: git config may only read here (--get, --list): settings such as core.fsmonitor "+
			"and aliases run programs", errShellPolicy)
	case "submodule":
		if slices.Contains(rest, "foreach") {
			return fmt.Errorf("%w: git submodule foreach runs the command its arguments give", errShellPolicy)
		}
	case "bisect":
		if len(rest) > 0 && rest[0] == "run" {
			return fmt.Errorf("%w: git bisect run runs the command its arguments give", errShellPolicy)
		}
	}
	return nil
}

// matchOption returns the first of opts that args use, or "". Besides the exact option and option=value it
// catches the spellings getopt and friends also accept: an unambiguous prefix of a long option (--to-comm for
// --to-command, which GNU tools and git take), a single-dash long option with two dashes (go's -exec as --exec),
// and a one-letter option in a cluster (-ave) or with its value glued on (-Iprog).
func matchOption(args, opts []string) string {
	// No stop at "--": find reads its expression after it, and a file named -exec is not worth a bypass.
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		for _, o := range opts {
			switch {
			case name == o:
				return o
			case len(o) > 2 && o[0] == '-' && o[1] != '-' && name == "-"+o: // -exec as --exec
				return o
			case len(o) > 3 && strings.HasPrefix(o, "--") && len(name) > 3 && strings.HasPrefix(o, name):
				return o
			case len(o) == 2 && o[0] == '-' && o[1] != '-' && len(a) > 2 && a[0] == '-' && a[1] != '-' &&
				strings.IndexByte(a[1:], o[1]) >= 0:
				return o
			}
		}
	}
	return ""
}

// pathCandidates returns the parts of one argument that a program might open as a path (rule 4). Words that
// are not paths resolve inside the working directory and pass; the cost is refusing a few that only look like
// paths outside (grep /usr/lib file), which search_files can do instead.
func pathCandidates(a string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if s[0] == '@' { // curl -d @file, gcc @file
			out = append(out, s[1:])
		}
		if len(s) >= 7 && strings.EqualFold(s[:7], "file://") {
			out = append(out, s[7:])
		}
	}
	switch {
	case a == "-" || a == "--":
	case strings.HasPrefix(a, "--"):
		if _, v, ok := strings.Cut(a, "="); ok {
			add(v)
		}
	case strings.HasPrefix(a, "-"):
		if _, v, ok := strings.Cut(a, "="); ok {
			add(v)
		} else if len(a) > 2 {
			add(a[2:])
			// A value glued to the last of clustered flags: tar -xvf../x.tar.
			if i := strings.IndexAny(a[2:], "/."); i > 0 {
				add(a[2+i:])
			}
		}
	default:
		add(a)
		if _, v, ok := strings.Cut(a, "="); ok { // make VAR=/x, dd if=/x
			add(v)
		}
	}
	return out
}

// checkArgs applies rule 4 to every argument, dir being the working directory (absolute, resolved).
func (w workspace) checkArgs(dir string, args []string, allowProtected []string) error {
	for _, a := range args {
		for _, c := range pathCandidates(a) {
			if err := w.checkArgPath(dir, a, c, allowProtected); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w workspace) checkArgPath(dir, arg, c string, allowProtected []string) error {
	if c == os.DevNull {
		return nil
	}
	full := c
	if !filepath.IsAbs(full) {
		full = filepath.Join(dir, full)
	}
	full = filepath.Clean(full)
	real, err := w.resolveArg(full, 0)
	if err != nil {
		return fmt.Errorf("%w: argument %q: %v", errShellPolicy, arg, err)
	}
	if !w.contains(real) {
		how := "is outside the workspace"
		if real != full && w.contains(full) {
			how = "leads through a symlink to " + real + ", outside the workspace"
		}
		return fmt.Errorf("%w: argument %q %s (root %s); run_shell confines path arguments to the workspace, "+
			"so use a relative path inside it", errShellPolicy, arg, how, w.root)
	}
	rel, err := filepath.Rel(w.root, real)
	if err != nil {
		return fmt.Errorf("%w: argument %q: %v", errShellPolicy, arg, err)
	}
	if name, why, ok := protectedIn(filepath.ToSlash(rel), allowProtected); ok {
		return fmt.Errorf("%w: argument %q names %s (%s), which is protected: run_shell cannot tell a read from a "+
			"write, so it does not name protected paths unless the user allows %s; read it with read_file instead",
			errShellPolicy, arg, name, why, name)
	}
	// Judged as a write too (mkdir objects, touch HEAD, git -C folder): run_shell cannot tell.
	if err := refuseGitShape(fmt.Sprintf("argument %q", arg), filepath.ToSlash(rel), allowProtected, w.exists); err != nil {
		return fmt.Errorf("%w: %w", errShellPolicy, err)
	}
	// os.Root-style confinement is by name: a second link to a file outside reads or changes that file, so
	// arguments are held to read_file's rule.
	if st, err := os.Lstat(real); err == nil && st.Mode().IsRegular() {
		if n := safefile.Links(st); n > 1 {
			return fmt.Errorf("%w: argument %q has %d hard links; run_shell names only files with one link, since "+
				"another link may lie outside the workspace", errShellPolicy, arg, n)
		}
	}
	return nil
}

// exists says whether rel (slash-separated, relative to the root) exists, without following a final symlink.
func (w workspace) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(w.root, filepath.FromSlash(rel)))
	return err == nil
}

// resolveArg resolves symlinks in full as far as it exists. A dangling link is followed by what it says, so
// `mkdir dangling/x` cannot create a directory outside. Names the filesystem cannot hold (too long, a file used
// as a directory) are not paths any program could open, and are judged as written.
func (w workspace) resolveArg(full string, depth int) (string, error) {
	real, err := resolveExisting(full)
	var de *danglingError
	switch {
	case err == nil:
		return real, nil
	case errors.As(err, &de) && depth < 8:
		target, lerr := os.Readlink(de.link)
		if lerr != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(de.link), target)
		}
		rest, _ := filepath.Rel(de.link, full)
		return w.resolveArg(filepath.Clean(filepath.Join(target, rest)), depth+1)
	case errors.As(err, &de):
		return "", errors.New("too many symlinks")
	}
	return full, nil
}

// checkShellNames validates the allowlist and the launchers the user gave (rule 1 and 2, at start).
func checkShellNames(shell, launchersAllowed []string) error {
	for _, list := range [][]string{shell, launchersAllowed} {
		for _, n := range list {
			switch {
			case strings.TrimSpace(n) == "":
				return errors.New("run_shell: an empty program name in the allowlist; remove the stray comma")
			case strings.ContainsRune(n, '/') || strings.ContainsRune(n, filepath.Separator):
				return fmt.Errorf("run_shell: %q is a path, not a program name: allow %q instead; run_shell looks "+
					"names up in PATH (never in the workspace) and runs nothing given as a path", n, filepath.Base(n))
			case strings.ContainsAny(n, " \t"):
				return fmt.Errorf("run_shell: %q: give a program name without arguments (e.g. %q)", n, strings.Fields(n)[0])
			}
		}
	}
	for _, n := range shell {
		if why, ok := launchers[n]; ok && !slices.Contains(launchersAllowed, n) {
			return fmt.Errorf("run_shell: %s %s, so allowing it allows every program; remove it, or allow it on "+
				"purpose as a launcher too (--allow-shell-launcher %s on the command line, allow_shell_launchers: [%s] "+
				"in an agent file)", n, why, n, n)
		}
	}
	return nil
}

// cleanPATH drops PATH entries a program planted by the model could sit in: empty and relative ones (the working
// directory) and those inside the workspace.
func cleanPATH(path string, w workspace) []string {
	var out []string
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if w.contains(real) || w.contains(d) || slices.Contains(out, d) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// lookPath finds name in dirs, skipping any candidate that resolves into the workspace.
func lookPath(name string, dirs []string, w workspace) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err != nil || w.contains(real) {
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("%q is not in PATH (%s)", name, strings.Join(dirs, string(os.PathListSeparator)))
}

// shellEnvNames are the variables a command inherits from visor; everything else (API keys, tokens, GIT_*,
// LD_PRELOAD, GOFLAGS, proxies, which may carry credentials…) is left out. PATH is replaced by the cleaned one.
// The certificate variables stay so that TLS works where the system keeps its roots elsewhere.
var shellEnvNames = []string{"HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ", "NO_COLOR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// gitEnv is configuration every git a command starts takes over the repository's own (command-line scope): no
// bare repository found by walking up from the working directory (safe.bareRepository), so a folder shaped like a
// git directory is not taken for one, and no fsmonitor program. The user may pass other GIT_CONFIG_* names, which
// come later and win.
var gitEnv = []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=safe.bareRepository", "GIT_CONFIG_VALUE_0=explicit",
	"GIT_CONFIG_KEY_1=core.fsmonitor", "GIT_CONFIG_VALUE_1=false"}

// shellEnv builds the child's environment from visor's: the allowlisted variables, LC_*, the extra names the
// user passes on purpose, PATH as cleaned and PWD.
func shellEnv(environ []string, extra []string, path []string, dir string) []string {
	env := []string{"PATH=" + strings.Join(path, string(os.PathListSeparator)), "PWD=" + dir}
	env = append(env, gitEnv...)
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "PATH" || k == "PWD" {
			continue
		}
		if slices.Contains(shellEnvNames, k) || strings.HasPrefix(k, "LC_") || slices.Contains(extra, k) {
			env = append(env, kv)
		}
	}
	return env
}

// checkShellEnv refuses passing visor's own variables (VISOR_API_KEY among them) to commands.
func checkShellEnv(extra []string) error {
	for _, k := range extra {
		if strings.HasPrefix(k, "VISOR_") || k == "PATH" || k == "" || strings.ContainsRune(k, '=') {
			return fmt.Errorf("run_shell environment: %q cannot be passed: give names of variables other than "+
				"PATH and visor's own VISOR_*", k)
		}
	}
	return nil
}
