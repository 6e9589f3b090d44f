package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/txncoord/txncoord/internal/freeport"
)

// A target is a kind of server the tests run against; each test gets a
// fresh one.
type target struct {
	name string
	// command is the server's command line with its first port and its
	// own empty directory.
	command func(port int, dir string) []string
}

// reservedPorts is how many consecutive ports a server may take: txncoord
// up puts its coordinator on the first and leader i on first+i (three
// leaders by default, more with --leaders in --up-args), kfake takes three.
const reservedPorts = 8

func txncoordTarget(bin string, upArgs []string) target {
	return target{name: "txncoord", command: func(port int, dir string) []string {
		return append([]string{bin, "up",
			"--data-dir", filepath.Join(dir, "data"),
			"--listen", "127.0.0.1:" + strconv.Itoa(port),
			"--admin-listen", "127.0.0.1:0",
		}, upArgs...)
	}}
}

func kfakeTarget(self string) target {
	return target{name: "kfake", command: func(port int, dir string) []string {
		return []string{self, "serve-kfake", "--port", strconv.Itoa(port), "--apis", filepath.Join(dir, apisFile)}
	}}
}

// apisFile is where serve-kfake writes the API keys it was asked for.
const apisFile = "apis.txt"

// readyLine is what both servers print once every listener is up.
var readyLine = regexp.MustCompile(`(?m)^(?:txncoord|kfake) ready bootstrap=(\S+)`)

// A server is a running target process.
type server struct {
	cmd       *exec.Cmd
	cancel    context.CancelFunc
	bootstrap string
	done      chan error
	stopOnce  sync.Once
}

// startServer starts t with its output in dir/server.log and waits for its
// ready line. A server that exits before it is ready (most likely a port
// taken between freeport's check and its bind) is started again on other
// ports, twice at most.
func startServer(t target, dir string) (*server, error) {
	var err error
	for range 3 {
		var s *server
		if s, err = startOnce(t, dir); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func startOnce(t target, dir string) (*server, error) {
	port, err := freeport.Run(reservedPorts)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	argv := t.command(port, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A graceful stop first: txncoord closes its log and bbolt on SIGTERM.
	// WaitDelay then bounds how long a stuck server may take.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	s := &server{cmd: cmd, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		out, _ := os.ReadFile(logPath)
		if m := readyLine.FindSubmatch(out); m != nil {
			s.bootstrap = string(m[1])
			return s, nil
		}
		select {
		case err := <-s.done:
			cancel()
			return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", t.name, err, logPath)
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("%s: no ready line in 60 s; see %s", t.name, logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the server (SIGTERM, then SIGKILL after WaitDelay) and waits
// for it; a second call does nothing. Its exit status is not judged: the
// tests are.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		err := <-s.done
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "conformance: stopping server: %v\n", err)
		}
	})
}
