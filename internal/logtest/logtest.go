// Package logtest collects a zerolog logger's JSON lines so tests can
// assert on what a component logged.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Buffer is an io.Writer for zerolog, safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger is a JSON logger at debug level writing to b.
func (b *Buffer) Logger() zerolog.Logger { return zerolog.New(b).Level(zerolog.DebugLevel) }

// Lines returns the logged lines whose fields include every key/value of
// want (all lines when want is empty); lines that are not JSON are skipped.
func (b *Buffer) Lines(want map[string]any) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		match := true
		for k, v := range want {
			if m[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}
