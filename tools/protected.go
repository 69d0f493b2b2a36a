package tools

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// protectedNames are the path components the tools will not write (write_file) or name in a command
// (run_shell) unless BuiltinConfig.AllowProtected lists them. Each is a place where a file runs a program at a
// moment the user does not think of as running the project's code: `git status` (a core.fsmonitor line in
// .git/config), a commit (hooks), opening the folder in an editor, entering it with direnv, starting a shell,
// `npm install` (.npmrc's script-shell). Reading them stays allowed.
//
// A path is protected when any of its components matches, compared without case (macOS and Windows fold it),
// after symlinks are resolved, so sub/.git/config and a link to .git/hooks are caught too.
//
// Not protected, on purpose: .gitmodules and .gitattributes (they name drivers and URLs, but only
// configuration, which is protected, can attach a program to them, and git refuses `!command` updates and the
// ext:: transport by default); Makefiles, package.json scripts and source code (running them is what the user
// asks for when they run the project, and they are what the model is there to edit).
var protectedNames = []struct{ name, why string }{
	{".git", "git metadata: its config and hooks run programs"},
	{".hg", "Mercurial metadata: its hgrc and hooks run programs"},
	{".svn", "Subversion metadata"},
	{".bzr", "Bazaar metadata"},
	{".jj", "Jujutsu metadata"},
	{"_darcs", "Darcs metadata"},
	{".husky", "git hooks (husky)"},
	{".githooks", "git hooks"},
	{".pre-commit-config.yaml", "git hooks (pre-commit)"},
	{"lefthook.yml", "git hooks (lefthook)"},
	{".lefthook.yml", "git hooks (lefthook)"},
	{".vscode", "editor configuration: tasks and settings run programs"},
	{".idea", "editor configuration"},
	{".devcontainer", "dev container configuration: it runs commands when the folder is opened"},
	{".vim", "editor configuration"},
	{".exrc", "editor configuration"},
	{".vimrc", "editor configuration"},
	{".nvimrc", "editor configuration"},
	{".nvim.lua", "editor configuration"},
	{".dir-locals.el", "editor configuration (Emacs evaluates it)"},
	{".envrc", "direnv runs it when a shell enters the folder"},
	{".bashrc", "shell startup file"},
	{".bash_profile", "shell startup file"},
	{".bash_login", "shell startup file"},
	{".bash_logout", "shell startup file"},
	{".profile", "shell startup file"},
	{".zshrc", "shell startup file"},
	{".zshenv", "shell startup file"},
	{".zprofile", "shell startup file"},
	{".zlogin", "shell startup file"},
	{".zlogout", "shell startup file"},
	{".cshrc", "shell startup file"},
	{".tcshrc", "shell startup file"},
	{".login", "shell startup file"},
	{".kshrc", "shell startup file"},
	{".inputrc", "shell startup file"},
	{".npmrc", "npm configuration: script-shell and node-options run programs"},
	{".yarnrc", "yarn configuration"},
	{".yarnrc.yml", "yarn configuration: yarnPath runs a program"},
	{".pnpmfile.cjs", "pnpm runs it on install"},
	{".cargo", "cargo configuration: runners and wrappers run programs"},
	{"mise.toml", "mise configuration: hooks run programs"},
	{".mise.toml", "mise configuration: hooks run programs"},
	{".gitconfig", "git configuration"},
	{".ssh", "ssh configuration and keys"},
	{".gnupg", "GnuPG configuration and keys"},
	{".netrc", "credentials"},
	{".config", "user configuration (a workspace at $HOME)"},
	{".local", "user programs and data (a workspace at $HOME)"},
}

// ProtectedNames lists the names BuiltinConfig.AllowProtected accepts.
func ProtectedNames() []string {
	out := make([]string, len(protectedNames))
	for i, p := range protectedNames {
		out[i] = p.name
	}
	return out
}

// protectedIn returns the protected name rel (slash-separated, relative to the root, symlinks resolved)
// passes through, and why it is protected; ok is false when rel is not protected or allow lists the name.
func protectedIn(rel string, allow []string) (name, why string, ok bool) {
	if slices.Contains(allow, "*") {
		return "", "", false
	}
	for c := range strings.SplitSeq(rel, "/") {
		for _, p := range protectedNames {
			if strings.EqualFold(c, p.name) && !slices.Contains(allow, p.name) {
				return p.name, p.why, true
			}
		}
	}
	return "", "", false
}

// refuseProtected is the model's error for a write into a protected path.
func refuseProtected(shown, rel string, allow []string) error {
	name, why, ok := protectedIn(rel, allow)
	if !ok {
		return nil
	}
	return fmt.Errorf("%s is inside %s (%s), which is protected: visor does not write there unless the user "+
		"allows it, because a change there can run programs outside the workspace; leave it alone or ask the "+
		"user to allow %s", shown, name, why, name)
}

// checkAllowProtected refuses names that are not protected, so a typo does not pass silently.
func checkAllowProtected(allow []string) error {
	for _, a := range allow {
		if a != "*" && !slices.Contains(ProtectedNames(), a) {
			return fmt.Errorf("allow protected %q: not a protected name; use one of %s, or * for all",
				a, strings.Join(ProtectedNames(), ", "))
		}
	}
	return nil
}

// gitShapeIn returns the folder of rel (slash-separated, relative to the root, symlinks resolved; the root itself
// included) that looks like a git directory once rel exists, and whether it already did. Git takes any folder
// that holds HEAD beside objects/ or refs/ (or a commondir file) for a repository, whatever its name: `git
// status` inside it, or `git -C`/`--git-dir` naming it, reads its config, whose core.fsmonitor runs a program,
// and its hooks. Protecting the name .git alone leaves every other folder to be made into one, a file at a time,
// so writes are judged by the shape they leave. exists says whether a path (relative to the root) exists now;
// names are compared without case, as on the filesystems that fold it.
func gitShapeIn(rel string, exists func(string) bool) (folder string, already, ok bool) {
	parts := []string{}
	if rel != "." && rel != "" {
		parts = strings.Split(rel, "/")
	}
	for i := 0; i <= len(parts); i++ {
		dir := "."
		if i > 0 {
			dir = strings.Join(parts[:i], "/")
		}
		next := ""
		if i < len(parts) {
			next = parts[i]
		}
		has := func(name string, withNext bool) bool {
			return (withNext && strings.EqualFold(next, name)) || exists(path.Join(dir, name))
		}
		shaped := func(withNext bool) bool {
			return has("HEAD", withNext) && (has("objects", withNext) || has("refs", withNext) || has("commondir", withNext))
		}
		if shaped(true) {
			return dir, shaped(false), true
		}
	}
	return "", false, false
}

// refuseGitShape is the model's error for a write (shown names it) that leaves a folder looking like a git
// directory, or goes into one; nil when none does or the user allows .git.
func refuseGitShape(shown, rel string, allow []string, exists func(string) bool) error {
	if slices.Contains(allow, "*") || slices.Contains(allow, ".git") {
		return nil
	}
	folder, already, ok := gitShapeIn(rel, exists)
	if !ok {
		return nil
	}
	where := "the workspace root"
	if folder != "." {
		where = folder
	}
	how := "would make " + where + " look like"
	switch {
	case already && folder == rel:
		how = "is " + where + ", which looks like"
	case already:
		how = "is inside " + where + ", which looks like"
	}
	return fmt.Errorf("%s %s a git directory (HEAD beside objects/ or refs/): git reads such a folder's config "+
		"and hooks, and a core.fsmonitor setting there runs a program at the user's next git command, so visor "+
		"does not write git metadata unless the user allows .git; choose other names", shown, how)
}
