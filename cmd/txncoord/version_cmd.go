package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// commit is set at build time with -ldflags "-X main.commit=..." (make
// build does): builds with -buildvcs=false carry no VCS stamp.
var commit = ""

// buildVersion is what `txncoord version` reports: the -ldflags version
// when set, else the module version the Go toolchain stamped (a tagged
// `go install`, or a pseudo-version); the commit from -ldflags, else the
// toolchain's VCS stamp; the Go version from the binary's build info.
type buildVersion struct {
	Version   string `json:"version"`
	Module    string `json:"module"`
	Commit    string `json:"commit"`
	CommitAt  string `json:"commit_time,omitempty"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.GoVersion = info.Main.Path, info.GoVersion
	if v.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if commit == "" {
				v.Commit = s.Value
			}
		case "vcs.time":
			v.CommitAt = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "print the version, the commit it was built from and the Go version",
		Description: "Example:\n   txncoord version -o json",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", EnvVars: env("output"), Usage: "table or json"},
		},
		Action: func(c *cli.Context) error {
			v := readBuildVersion()
			switch c.String("output") {
			case "json":
				return printJSON(c.App.Writer, v)
			case "table":
			default:
				return usagef("-o %q: want table or json", c.String("output"))
			}
			commit := v.Commit
			if v.Modified {
				commit += " (modified)"
			}
			_, err := fmt.Fprintf(c.App.Writer, "txncoord %s\ncommit %s\n%s %s\n", v.Version, commit, v.GoVersion, v.Platform)
			return err
		},
	}
}
