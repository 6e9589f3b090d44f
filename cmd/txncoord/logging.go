package main

import (
	"os"
	"slices"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

var logger = zerolog.Nop()

const (
	logLevelUsage  = "debug, info, warn or error"
	logFormatUsage = "auto (console on a terminal, JSON otherwise), console or json"
)

// logFlags are the global flags, before the command.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"TXNCOORD_LOG_LEVEL"}, Usage: logLevelUsage},
		&cli.StringFlag{Name: "log-format", Value: "auto", EnvVars: []string{"TXNCOORD_LOG_FORMAT"}, Usage: logFormatUsage},
	}
}

// commandLogFlags are the same flags after a command. They have no default
// and no environment variable of their own: unset, the global flag (or
// TXNCOORD_LOG_LEVEL, or its default) holds.
func commandLogFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Usage: logLevelUsage + " (also before the command)"},
		&cli.StringFlag{Name: "log-format", Usage: logFormatUsage + " (also before the command)"},
	}
}

// logSetting is a log flag as given closest to the command: after it,
// else before it (or from the environment, or the default).
func logSetting(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if slices.Contains(ctx.LocalFlagNames(), name) {
			return ctx.String(name)
		}
	}
	return c.String(name) // the root's value, or its default
}

// setupLogging writes logs to stderr: human console output on a terminal,
// JSON otherwise, so stdout stays for command output and the ready line.
func setupLogging(c *cli.Context) error {
	levelName, format := logSetting(c, "log-level"), logSetting(c, "log-format")
	if levelName == "" {
		levelName = "info"
	}
	level, err := zerolog.ParseLevel(levelName)
	if err != nil || level == zerolog.NoLevel {
		return usagef("--log-level %q: want %s", levelName, logLevelUsage)
	}
	var console bool
	switch format {
	case "auto", "":
		console = isatty.IsTerminal(os.Stderr.Fd())
	case "console":
		console = true
	case "json":
	default:
		return usagef("--log-format %q: want auto, console or json", format)
	}
	if console {
		logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}).Level(level).With().Timestamp().Logger()
	} else {
		logger = zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	}
	return nil
}

// env names the environment variable of a flag: TXNCOORD_ + upper snake.
func env(flag string) []string {
	b := []byte("TXNCOORD_")
	for _, r := range flag {
		switch {
		case r == '-':
			b = append(b, '_')
		case r >= 'a' && r <= 'z':
			b = append(b, byte(r-'a'+'A'))
		default:
			b = append(b, byte(r))
		}
	}
	return []string{string(b)}
}
