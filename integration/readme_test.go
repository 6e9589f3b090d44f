package integration

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// copyTracked copies the files git tracks (as they are in the work tree)
// into dir: what a fresh clone of this change would hold.
func copyTracked(t *testing.T, root, dir string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the quickstart test needs the tracked file list", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Stat(src)
		if err != nil || info.IsDir() {
			continue // deleted in the work tree
		}
		dst := filepath.Join(dir, name)
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
// exit 0 against it.
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

	run := exec.Command("make", "run")
	run.Dir = dir
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
		if !strings.Contains(line, "bootstrap=127.0.0.1:9092") || !strings.Contains(line, "admin=http://127.0.0.1:9644") {
			t.Fatalf("ready line %q does not match the README", line)
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
