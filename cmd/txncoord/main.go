// Command txncoord runs a Kafka-wire-compatible transaction coordinator with
// an embedded partition leader, and the admin commands that operate it.
//
// Exit codes: 0 success, 1 runtime error, 2 usage error (bad flags, bad
// cluster file).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// usageError marks errors that are the caller's to fix (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr *os.File) int {
	app := newApp()
	app.Writer, app.ErrWriter = stdout, stderr
	err := app.Run(args)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "txncoord: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "txncoord",
		Usage:                "Kafka transaction coordinator with KIP-1228 marker version negotiation",
		Version:              version,
		EnableBashCompletion: false,
		HideHelpCommand:      true,
		Flags:                logFlags(),
		Before:               setupLogging,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		// Errors are printed once, by run, with the exit code it picks.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			upCommand(),
			coordinatorCommand(),
			leaderCommand(),
			txnCommand(),
			producersCommand(),
			leadersCommand(),
			markersCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintln(c.App.Writer, version)
					return nil
				},
			},
		},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "txncoord: unknown command %q (see txncoord --help)\n", name)
			os.Exit(2)
		},
	}
	markUsageErrors(app.Commands)
	return app
}

// markUsageErrors makes flag errors of every (sub)command usage errors
// (exit code 2); urfave/cli calls only the command's own OnUsageError.
func markUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
		markUsageErrors(c.Subcommands)
	}
}
