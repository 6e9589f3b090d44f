package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestReadmeFlagsExist: every `--flag` the README gives a txncoord command,
// in its code blocks, in prose written as `txncoord command --flag` or as
// "`--flag`, ... on `command` and `command`", is a flag of that command (the README once named `coordinator --etcd-endpoints`
// and `--transaction-state-partitions`, which do not exist).
func TestReadmeFlagsExist(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	app := newApp()
	find := func(cmds []*cli.Command, name string) *cli.Command {
		for _, c := range cmds {
			if c.Name == name {
				return c
			}
		}
		return nil
	}
	hasFlag := func(c *cli.Command, name string) bool {
		for _, f := range append(c.Flags, app.Flags...) {
			for _, n := range f.Names() {
				if n == name {
					return true
				}
			}
		}
		return false
	}
	flagRE := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	// A command line: txncoord, its command and subcommand words, then
	// flags (up to the end of the line, a comment, or a closing backtick).
	lineRE := regexp.MustCompile("(?:^|[`\\s/])(?:\\./bin/)?txncoord ((?:[a-z][a-z-]* ?)+)([^`#(\\n]*)")
	checked := 0
	for i, line := range strings.Split(string(raw), "\n") {
		for _, m := range lineRE.FindAllStringSubmatch(line, -1) {
			words := strings.Fields(m[1])
			cmd := find(app.Commands, words[0])
			if cmd == nil {
				continue // prose ("txncoord is ..."), not a command
			}
			rest := strings.Join(words[1:], " ") + " " + m[2]
			if len(words) > 1 {
				if sub := find(cmd.Subcommands, words[1]); sub != nil {
					cmd = sub
				}
			}
			// Alternatives written in one line (`fault list | fault clear
			// [--id N]`) name another subcommand's flags.
			if strings.Contains(rest, "|") {
				continue
			}
			for _, f := range flagRE.FindAllStringSubmatch(rest, -1) {
				checked++
				if !hasFlag(cmd, f[1]) {
					t.Errorf("README.md:%d: txncoord %s has no flag --%s: %s", i+1, cmd.Name, f[1], strings.TrimSpace(line))
				}
			}
		}
	}
	// Prose: "`--a`, `--b` and `--c` on `up` and `coordinator`".
	text := strings.Join(strings.Fields(string(raw)), " ")
	proseRE := regexp.MustCompile("((?:`--[a-z][a-z0-9-]*`(?:,| and)? )+)on ((?:`[a-z]+`(?:,? and |, )?)+)")
	cmdRE := regexp.MustCompile("`([a-z]+)`")
	for _, m := range proseRE.FindAllStringSubmatch(text, -1) {
		for _, c := range cmdRE.FindAllStringSubmatch(m[2], -1) {
			cmd := find(app.Commands, c[1])
			if cmd == nil {
				t.Errorf("README.md: %q names no txncoord command %q", m[0], c[1])
				continue
			}
			for _, f := range flagRE.FindAllStringSubmatch(m[1], -1) {
				checked++
				if !hasFlag(cmd, f[1]) {
					t.Errorf("README.md: %q: txncoord %s has no flag --%s", m[0], cmd.Name, f[1])
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d flags checked: the README's command lines were not found", checked)
	}
}
