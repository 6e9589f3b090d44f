package main

import (
	"fmt"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

var logger = zerolog.Nop()

func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"TXNCOORD_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "auto", EnvVars: []string{"TXNCOORD_LOG_FORMAT"}, Usage: "auto (console on a terminal, JSON otherwise), console or json"},
	}
}

// setupLogging writes logs to stderr: human console output on a terminal,
// JSON otherwise, so stdout stays for command output and the ready line.
func setupLogging(c *cli.Context) error {
	level, err := zerolog.ParseLevel(c.String("log-level"))
	if err != nil || level == zerolog.NoLevel {
		return usagef("--log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	var console bool
	switch c.String("log-format") {
	case "auto":
		console = isatty.IsTerminal(os.Stderr.Fd())
	case "console":
		console = true
	case "json":
	default:
		return usagef("--log-format %q: want auto, console or json", c.String("log-format"))
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

var _ = fmt.Sprintf
