package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txncoord/txncoord/internal/freeport"
)

// quickstartCommands returns the shell commands of the README's Quickstart
// section, in order (the fenced sh blocks, comments stripped).
func quickstartCommands(t *testing.T, readme string) []string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "## Quickstart")
	if !ok {
		t.Fatal("README has no Quickstart section")
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	var cmds []string
	inSh := false
	for _, line := range strings.Split(after, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh:
			cmd, _, _ := strings.Cut(line, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				cmds = append(cmds, cmd)
			}
		}
	}
	return cmds
}

// checkoutFiles lists, relative to root and slash-separated, what a fresh
// clone of this change holds: the files git tracks. Where git cannot say
// (not installed, no .git, or "dubious ownership" when CI runs as root in
// a checkout another user owns) it is the work tree less .git and what
// the .gitignore files ignore, which in a fresh clone is the same set; the
// test logs which it used.
func checkoutFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "-C", root, "ls-files", "-z")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	t.Logf("git ls-files failed (%v: %s): copying the work tree less .git and .gitignore's patterns instead",
		err, strings.TrimSpace(stderr.String()))
	return workTreeFiles(t, root)
}

// gitignore holds the patterns of one .gitignore file, in the forms this
// repository uses: an optional leading / (anchored at the file's
// directory), an optional trailing / (only directories), and path.Match
// wildcards; a pattern with a / inside is anchored, one without matches a
// name at any depth below, as in git.
type gitignore []struct {
	pattern  string
	anchored bool
	dirOnly  bool
}

// readGitignore reads dir/.gitignore (nil when there is none).
func readGitignore(t *testing.T, dir string) gitignore {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var g gitignore
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") || strings.Contains(line, "**") || strings.Contains(line, "\\") {
			t.Fatalf("%s/.gitignore pattern %q: the quickstart test's reader knows only /, trailing / and * ? [] (extend gitignore)", dir, line)
		}
		dirOnly := strings.HasSuffix(line, "/")
		line = strings.TrimSuffix(line, "/")
		anchored := strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		if _, err := path.Match(line, ""); err != nil {
			t.Fatalf("%s/.gitignore pattern %q: %v", dir, line, err)
		}
		g = append(g, struct {
			pattern  string
			anchored bool
			dirOnly  bool
		}{line, anchored, dirOnly})
	}
	return g
}

// ignores reports whether rel (slash-separated, relative to the
// .gitignore's directory) is ignored by these patterns.
func (g gitignore) ignores(rel string, isDir bool) bool {
	for _, p := range g {
		if p.dirOnly && !isDir {
			continue
		}
		name := path.Base(rel)
		if p.anchored {
			name = rel
		}
		if ok, _ := path.Match(p.pattern, name); ok {
			return true
		}
	}
	return false
}

// workTreeFiles lists the regular files under root, slash-separated, less
// .git and what the .gitignore files (at the root and below) ignore.
func workTreeFiles(t *testing.T, root string) []string {
	t.Helper()
	rules := map[string]gitignore{} // by directory, relative to root ("." for root)
	ignored := func(rel string, isDir bool) bool {
		for dir := path.Dir(rel); ; dir = path.Dir(dir) {
			if g := rules[dir]; g != nil {
				sub := rel
				if dir != "." {
					sub = strings.TrimPrefix(rel, dir+"/")
				}
				if g.ignores(sub, isDir) {
					return true
				}
			}
			if dir == "." {
				return false
			}
		}
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == ".git" || ignored(rel, true)) {
				return filepath.SkipDir
			}
			rules[rel] = readGitignore(t, p)
			return nil
		}
		if d.Name() == ".git" || ignored(rel, false) {
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("listing the work tree: %v", err)
	}
	return files
}

// copyTracked copies what a fresh clone would hold (checkoutFiles), as the
// files are in the work tree, into dir.
func copyTracked(t *testing.T, root, dir string) {
	t.Helper()
	for _, name := range checkoutFiles(t, root) {
		src := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Stat(src)
		if err != nil || info.IsDir() {
			continue // deleted in the work tree
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadmeQuickstart follows the README's quickstart literally in a copy
// of the tracked tree: `make run` must print the ready line, and every
// other command it lists (except `make test`, which is this suite) must
// exit 0 against it. It runs on ports of its own, chosen the way the
// README lets a user choose them (TXNCOORD_LISTEN, TXNCOORD_ADMIN_LISTEN
// and, for the admin commands, TXNCOORD_ADMIN), so another program on
// 9092-9095 or 9644 (a developer's `make run`) does not fail it; the
// README's ready line must then name those ports in place of the defaults.
func TestReadmeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the quickstart test builds and runs the binary")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := quickstartCommands(t, string(readme))
	if len(cmds) < 2 || cmds[0] != "make run" || cmds[1] != "make test" {
		t.Fatalf("the quickstart's first two commands must be make run and make test, got %q", cmds)
	}
	dir := t.TempDir()
	copyTracked(t, root, dir)

	base, err := freeport.Run(4)
	if err != nil {
		t.Fatal(err)
	}
	listen, adminListen := fmt.Sprintf("127.0.0.1:%d", base), freeAddr(t)
	env := append(os.Environ(), "TXNCOORD_LISTEN="+listen, "TXNCOORD_ADMIN_LISTEN="+adminListen, "TXNCOORD_ADMIN=http://"+adminListen)
	const readmeReady = "txncoord ready bootstrap=127.0.0.1:9092 admin=http://127.0.0.1:9644"
	if !strings.Contains(string(readme), readmeReady) {
		t.Fatalf("the README's quickstart does not show the ready line %q", readmeReady)
	}
	wantReady := strings.NewReplacer("127.0.0.1:9092", listen, "127.0.0.1:9644", adminListen).Replace(readmeReady)

	run := exec.Command("make", "run")
	run.Dir = dir
	run.Env = env
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "txncoord ready ") {
				ready <- sc.Text()
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if line != wantReady {
			t.Fatalf("ready line %q does not match the README's (with this test's ports): %q", line, wantReady)
		}
	case err := <-done:
		t.Fatalf("make run exited before ready: %v\n%s", err, stderr.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run: no ready line in 3 minutes\n%s", stderr.String())
	}
	for _, c := range cmds[2:] {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", c)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README command %q failed: %v\n%s", c, err, out)
		}
		t.Logf("$ %s\n%s", c, out)
	}
	// SIGINT, as a user's Ctrl-C, stops it within 15 s.
	syscall.Kill(-run.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("make run did not stop within 15 s of SIGINT")
	}
}
