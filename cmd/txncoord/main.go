// Command txncoord runs a Kafka-wire-compatible transaction coordinator with
// an embedded partition leader, and the admin commands that operate it.
//
// Exit codes: 0 success, 1 runtime error, 2 usage error (bad flags, bad
// cluster file).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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

// run runs the CLI and returns its exit code. Every error is printed as
// one line on stderr: "txncoord: " and the error, its lines joined.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp()
	app.Writer, app.ErrWriter = stdout, stderr
	// `txncoord help NAME` with an unknown NAME lands here; urfave/cli
	// gives it no way to return an error, so keep it for below.
	var notFound error
	app.CommandNotFound = func(_ *cli.Context, name string) {
		notFound = unknownCommand(name)
	}
	err := app.Run(args)
	if err == nil {
		err = notFound
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "txncoord: %s\n", oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// oneLine joins the lines of a (possibly joined) error with "; ".
func oneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.TrimSuffix(l, ":"))
		}
	}
	return strings.Join(parts, "; ")
}

func unknownCommand(name string) error {
	return usagef("unknown command %q (txncoord help lists the commands)", name)
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "txncoord",
		Usage:                "Kafka transaction coordinator with KIP-1228 marker version negotiation",
		Version:              version,
		EnableBashCompletion: true, // the completion scripts ask for --generate-bash-completion
		Description:          "txncoord help [COMMAND [SUBCOMMAND]] (or COMMAND --help) shows a command's flags.",
		// urfave/cli's help command reads one level only (help txn, not
		// help txn abort): the root's action serves help instead.
		HideHelpCommand: true,
		Flags:           logFlags(),
		// A name that is not a command lands in the root's action.
		Action: func(c *cli.Context) error {
			switch {
			case c.Args().First() == "help":
				return showHelp(c, c.Args().Tail())
			case c.Args().Present():
				return unknownCommand(c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return flagError(c, err)
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
			coordinatorsCommand(),
			markersCommand(),
			groupsCommand(),
			topicsCommand(),
			statusCommand(),
			produceCommand(),
			consumeCommand(),
			completionCommand(),
			faultCommand(),
			versionCommand(),
			aclsCommand(),
		},
	}
	prepareCommands(app.Commands)
	return app
}

// showHelp is `txncoord help [COMMAND [SUBCOMMAND]]`: the text of
// `txncoord COMMAND SUBCOMMAND --help`, at any depth.
func showHelp(c *cli.Context, path []string) error {
	cmds := c.App.Commands
	for i, name := range path {
		var found *cli.Command
		for _, cmd := range cmds {
			if cmd.HasName(name) {
				found = cmd
			}
		}
		if found == nil {
			return unknownCommand(strings.Join(path[:i+1], " "))
		}
		cmds = found.Subcommands
	}
	app := newApp()
	app.Writer, app.ErrWriter = c.App.Writer, c.App.ErrWriter
	return app.Run(append(append([]string{c.App.Name}, path...), "--help"))
}

// prepareCommands makes flag errors of every (sub)command usage errors
// (exit code 2; urfave/cli calls only the command's own OnUsageError),
// makes an unknown subcommand of a group (txn) and a positional argument
// (commands take named flags only, as kafka-transactions.sh) usage
// errors, and gives every command the global log flags, so that `txncoord
// up --log-level debug` works as well as `txncoord --log-level debug up`.
func prepareCommands(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = func(ctx *cli.Context, err error, _ bool) error { return flagError(ctx, err) }
		if len(c.Subcommands) > 0 {
			c.Action = func(ctx *cli.Context) error {
				if ctx.Args().Present() {
					return unknownCommand(ctx.Command.Name + " " + ctx.Args().First())
				}
				return cli.ShowSubcommandHelp(ctx)
			}
			prepareCommands(c.Subcommands)
			continue
		}
		c.Flags = append(c.Flags, commandLogFlags()...)
		c.Before = func(ctx *cli.Context) error {
			if ctx.NArg() > 0 {
				return usagef("unexpected argument %q: %s takes named flags only (see %s --help)", ctx.Args().First(), ctx.Command.HelpName, ctx.Command.HelpName)
			}
			return setupLogging(ctx)
		}
	}
}

// flagError words a flag parsing error of Go's flag package as the rest of
// the CLI does (--name, not -name) and points at the command's help.
func flagError(c *cli.Context, err error) error {
	msg := err.Error()
	dashed := func(s string) string { return "--" + strings.TrimLeft(s, "-") }
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		msg = "unknown flag " + dashed(strings.TrimPrefix(msg, "flag provided but not defined: "))
	case strings.HasPrefix(msg, "flag needs an argument: "):
		msg = dashed(strings.TrimPrefix(msg, "flag needs an argument: ")) + " needs a value"
	case strings.HasPrefix(msg, "invalid value "):
		// invalid value "x" for flag -partition: parse error
		if value, rest, ok := strings.Cut(strings.TrimPrefix(msg, "invalid value "), " for flag "); ok {
			name, _, _ := strings.Cut(rest, ":")
			msg = fmt.Sprintf("%s %s: not a valid value", dashed(name), value)
		}
	case strings.HasPrefix(msg, "invalid boolean value "):
		// invalid boolean value "maybe" for -secure: parse error
		if value, rest, ok := strings.Cut(strings.TrimPrefix(msg, "invalid boolean value "), " for "); ok {
			name, _, _ := strings.Cut(rest, ":")
			msg = fmt.Sprintf("%s %s: want true or false", dashed(name), value)
		}
	}
	help := c.App.Name
	if c.Command != nil && c.Command.HelpName != "" {
		help = c.Command.HelpName
	}
	help += " --help"
	return usagef("%s (see %s)", msg, help)
}
