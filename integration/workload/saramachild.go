package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/txncoord/txncoord/integration/checker"
)

// Sarama in a child process. The race detector stays on for our code in a
// -race test binary, but sarama's own data race (IBM/sarama#2913:
// transitionTo and publishTxnPartitions take different locks) would fail
// any test whose transactional produce is retried. So such a binary runs
// sarama in the saramaworker program, built once per process without
// -race: the Config goes in as JSON on stdin, the child's log lines
// (zerolog JSON on stderr) are written to Config.Log, and the History and
// error come back as JSON on stdout, the History exactly as
// saramaInProcess returned it.
//
// The child stops like the in-process driver does when ctx ends: on
// SIGTERM it cancels its context and still answers. It also stops when its
// stdin reaches EOF, which it does when this process dies, so no child
// outlives a killed test binary.

const saramaWorkerPkg = "github.com/txncoord/txncoord/integration/workload/saramaworker"

// saramaResult is what the child writes to stdout.
type saramaResult struct {
	History checker.History
	Err     string
}

var saramaWorker struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// saramaWorkerBinary builds saramaworker once per process, without -race,
// into a temporary directory that RemoveSaramaWorker removes.
func saramaWorkerBinary() (string, error) {
	w := &saramaWorker
	w.once.Do(func() {
		w.dir, w.err = os.MkdirTemp("", "txncoord-saramaworker-")
		if w.err != nil {
			return
		}
		w.path = filepath.Join(w.dir, "saramaworker")
		// The import path resolves within the module of the working
		// directory (a test's is its package directory).
		cmd := exec.Command("go", "build", "-o", w.path, saramaWorkerPkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			w.err = fmt.Errorf("workload: go build saramaworker: %v\n%s", err, out)
		}
	})
	return w.path, w.err
}

// RemoveSaramaWorker removes the saramaworker binary built by this
// process, if any; a TestMain calls it after the tests.
func RemoveSaramaWorker() {
	if saramaWorker.dir != "" {
		os.RemoveAll(saramaWorker.dir)
	}
}

// saramaStopTimeout bounds how long a child may take to answer after
// SIGTERM: like the in-process driver, it aborts the open transaction
// (OpTimeout) and closes the client (closeTimeout); a client being made
// may take another OpTimeout.
func saramaStopTimeout(cfg Config) time.Duration {
	return 2*cfg.OpTimeout + closeTimeout + 5*time.Second
}

func saramaChild(ctx context.Context, cfg Config) (checker.History, error) {
	if err := cfg.defaults(); err != nil {
		return checker.History{}, err
	}
	bin, err := saramaWorkerBinary()
	if err != nil {
		return checker.History{}, err
	}
	in, err := json.Marshal(cfg)
	if err != nil {
		return checker.History{}, err
	}
	cmd := exec.Command(bin)
	var out bytes.Buffer
	cmd.Stdout = &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return checker.History{}, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return checker.History{}, err
	}
	if err := cmd.Start(); err != nil {
		return checker.History{}, fmt.Errorf("workload: saramaworker: %w", err)
	}
	// stdin stays open until Wait: its EOF tells the child to stop.
	if _, err := stdin.Write(append(in, '\n')); err != nil {
		cmd.Process.Kill()
	}
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			relayLog(cfg.Log, sc.Bytes())
		}
		io.Copy(io.Discard, stderr) // after an over-long line
		exited <- cmd.Wait()
	}()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case waitErr = <-exited:
		case <-time.After(saramaStopTimeout(cfg)):
			cmd.Process.Kill()
			waitErr = <-exited
		}
	}
	var res saramaResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return checker.History{}, fmt.Errorf("workload: saramaworker gave no history (%v): %v", waitErr, err)
	}
	if res.Err != "" {
		return res.History, errors.New(res.Err)
	}
	return res.History, nil
}

// relayLog writes one of the child's stderr lines to log: a zerolog line
// at its level with its fields, anything else (a panic) as a warning.
func relayLog(log zerolog.Logger, line []byte) {
	var fields map[string]any
	if json.Unmarshal(line, &fields) != nil {
		log.Warn().Str("stderr", string(line)).Msg("saramaworker")
		return
	}
	level, _ := fields[zerolog.LevelFieldName].(string)
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.NoLevel
	}
	msg, _ := fields[zerolog.MessageFieldName].(string)
	delete(fields, zerolog.LevelFieldName)
	delete(fields, zerolog.MessageFieldName)
	log.WithLevel(lvl).Fields(fields).Msg(msg)
}

// SaramaWorker is the saramaworker program: it reads a Config (JSON) from
// in, runs the sarama driver in this process until it ends, ctx ends or in
// reaches EOF, and writes the History and error (JSON) to out. The driver
// logs zerolog JSON lines to logw.
func SaramaWorker(ctx context.Context, in io.Reader, out, logw io.Writer) error {
	dec := json.NewDecoder(in)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("saramaworker: config: %w", err)
	}
	cfg.Log = zerolog.New(logw)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, in) // EOF: the parent has gone or given up
		cancel()
	}()
	h, err := saramaInProcess(ctx, cfg)
	res := saramaResult{History: h}
	if err != nil {
		res.Err = err.Error()
	}
	return json.NewEncoder(out).Encode(res)
}
