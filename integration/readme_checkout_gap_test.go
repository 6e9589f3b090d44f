package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWorkTreeFilesHonoursGitignore: the quickstart test's copy without
// git leaves out .git and what the .gitignore files ignore, with git's
// meaning of anchored, directory-only and nested patterns.
func TestWorkTreeFilesHonoursGitignore(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "# build output\n/bin/\n/txncoord-data/\n*.test\n*.out\n/results/\n/txncoord\n")
	write("sub/.gitignore", "/node_modules/\n/package-lock.json\n")
	for _, rel := range []string{
		".git/config", "bin/txncoord", "txncoord-data/txncoord.db", "results/x/report.md", "txncoord",
		"pkg/pkg.test", "cover.out", "sub/node_modules/m/index.js", "sub/package-lock.json",
	} {
		write(rel, "ignored")
	}
	want := []string{
		".gitignore", "Makefile", "README.md", "cmd/txncoord/main.go", "pkg/bin/keep.go", "pkg/txncoord",
		"sub/.gitignore", "sub/deep/package-lock.json", "sub/package.json",
	}
	for _, rel := range want {
		if !strings.HasSuffix(rel, ".gitignore") {
			write(rel, "kept")
		}
	}
	got := workTreeFiles(t, root)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("work tree files:\n got %q\nwant %q", got, want)
	}
}

// TestWorkTreeFilesMatchGit: on this repository, the list the quickstart
// test falls back to without git is exactly what git counts as part of the
// tree (tracked, or untracked and not ignored), so in a fresh clone it is
// the tracked files. Needs git to compare with.
func TestWorkTreeFilesMatchGit(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	gitList := func() []string {
		out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
		if err != nil {
			t.Skipf("git ls-files failed (%v): nothing to compare the fallback with; TestWorkTreeFilesHonoursGitignore still covers it", err)
		}
		var files []string
		for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err == nil && !info.IsDir() {
				files = append(files, name) // tracked files deleted in the work tree are in no copy
			}
		}
		slices.Sort(files)
		return slices.Compact(files)
	}
	// Others may be adding files to this work tree: compare a walk with
	// the git lists taken around it, a few times.
	var walked, before []string
	for range 3 {
		before = gitList()
		walked = workTreeFiles(t, root)
		slices.Sort(walked)
		if after := gitList(); slices.Equal(before, after) && slices.Equal(walked, before) {
			return
		}
	}
	var onlyWalk, onlyGit []string
	for _, f := range walked {
		if _, ok := slices.BinarySearch(before, f); !ok {
			onlyWalk = append(onlyWalk, f)
		}
	}
	for _, f := range before {
		if _, ok := slices.BinarySearch(walked, f); !ok {
			onlyGit = append(onlyGit, f)
		}
	}
	t.Fatalf("the fallback file list differs from git's:\nonly in the walk: %q\nonly in git: %q", onlyWalk, onlyGit)
}

// TestCheckoutFilesWithoutGit: when git cannot list the files (here: a
// GIT_DIR that does not exist, as git fails for a checkout owned by
// another user), the quickstart test still gets the tree, without build
// output, instead of skipping.
func TestCheckoutFilesWithoutGit(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "no-such-git-dir"))
	if err := exec.Command("git", "-C", root, "ls-files").Run(); err == nil {
		t.Fatal("git ls-files still works with a missing GIT_DIR: this test does not reach the fallback")
	}
	files := checkoutFiles(t, root)
	for _, want := range []string{"README.md", "Makefile", "go.mod", "cmd/txncoord/main.go", "integration/readme_test.go"} {
		if !slices.Contains(files, want) {
			t.Errorf("the fallback list lacks %s", want)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, ".git/") || strings.HasPrefix(f, "bin/") || strings.HasPrefix(f, "txncoord-data/") {
			t.Errorf("the fallback list holds %s", f)
		}
	}
}
