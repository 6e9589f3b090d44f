package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The bash script, sourced in a real bash, completes commands, subcommands
// and flags by asking the binary; fish's lists the commands; an unknown
// shell is a usage error.
func TestCompletion(t *testing.T) {
	bin := txncoordBinary(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("no bash on this machine to source the script in: %v", err)
	}
	complete := func(words ...string) string {
		t.Helper()
		script := `source <(txncoord completion bash)
COMP_WORDS=(` + strings.Join(quoteAll(words), " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_txncoord_complete
echo "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("txncoord", "tx"); got != "txn" {
		t.Errorf("txncoord tx<TAB>: %q, want txn", got)
	}
	if got := strings.Fields(complete("txncoord", "groups", "")); !slices.Contains(got, "reset-offsets") || !slices.Contains(got, "describe") {
		t.Errorf("txncoord groups <TAB>: %q", got)
	}
	if got := strings.Fields(complete("txncoord", "txn", "abort", "--start")); len(got) != 1 || got[0] != "--start-offset" {
		t.Errorf("txncoord txn abort --start<TAB>: %q, want --start-offset", got)
	}
	fish, _, code := runCLI(t, "completion", "fish")
	if code != 0 || !strings.Contains(fish, "complete -c txncoord") || !strings.Contains(fish, "find-hanging") {
		t.Errorf("completion fish: exit %d:\n%.400s", code, fish)
	}
	zsh, _, code := runCLI(t, "completion", "zsh")
	if code != 0 || !strings.HasPrefix(zsh, "#compdef txncoord") {
		t.Errorf("completion zsh: exit %d:\n%.200s", code, zsh)
	}
	if _, stderr, code := runCLI(t, "completion", "tcsh"); code != 2 || !strings.Contains(stderr, `unknown command "completion tcsh"`) {
		t.Errorf("completion tcsh: exit %d: %s", code, stderr)
	}
}

func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return out
}
