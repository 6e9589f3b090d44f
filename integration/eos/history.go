package eos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/txncoord/txncoord/integration/checker"
)

// Line is one line of a member's history file (JSON lines). A member
// writes each line with one write(2) before it acts, so a SIGKILL can cut
// only the last line, and a cut line is an action that never started.
type Line struct {
	Ev string `json:"ev"` // start, assigned, revoked, txn, commit, end, stop

	// start
	Member string `json:"member,omitempty"`
	Stage  int    `json:"stage,omitempty"`
	Client string `json:"client,omitempty"`
	TxnID  string `json:"txn_id,omitempty"`

	// assigned / revoked
	Gen   int32   `json:"gen,omitempty"` // -1 when the client does not say
	Parts []int32 `json:"parts,omitempty"`

	// txn, commit, end
	ID      string     `json:"id,omitempty"`
	In      []Consumed `json:"in,omitempty"`
	Out     []Produced `json:"out,omitempty"`
	Outcome string     `json:"outcome,omitempty"` // end: committed, aborted, unknown
	Err     string     `json:"err,omitempty"`
}

// Consumed is one record a transaction consumed.
type Consumed struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

// Produced is one record a transaction produced.
type Produced struct {
	P int32  `json:"p"`
	V string `json:"v"`
}

// Recorder appends events to a member's history file.
type Recorder struct {
	mu sync.Mutex
	f  *os.File
}

// NewRecorder creates (or appends to) a history file.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f}, nil
}

// Record writes one event as one line with a single write, unbuffered: once
// it returns, the line survives a SIGKILL of the process (it is in the
// kernel), so the action that follows it is on record.
func (r *Recorder) Record(e Line) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err = r.f.Write(b)
	return err
}

// Close closes the file.
func (r *Recorder) Close() error { return r.f.Close() }

// Attempt is one transaction of one member, with its outcome as the client
// saw it.
type Attempt struct {
	ID      string
	Member  string
	Stage   int
	Outcome checker.Outcome
	In      []Consumed
	Out     []Produced
	Err     string
}

// Member is one member process's run (one incarnation of a slot).
type Member struct {
	Name   string
	Stage  int
	Client string
	// Assignments counts the assignments the member received; Gens are
	// the distinct generations it saw (when the client reports them).
	Assignments int
	Gens        map[int32]bool
	Stopped     bool // it wrote its stop line: a graceful exit
	Attempts    []*Attempt
}

// History is every member's record of a run.
type History struct {
	Members []*Member
}

// Attempts returns every attempt of a stage, members in name order and
// each member's attempts in the order it ran them.
func (h *History) Attempts(stage int) []*Attempt {
	var out []*Attempt
	for _, m := range h.Members {
		if m.Stage == stage {
			out = append(out, m.Attempts...)
		}
	}
	return out
}

// ParseMember reads one member's history. A last line that is cut (the
// process was killed while writing it) is ignored; any other bad line is an
// error.
func ParseMember(r io.Reader) (*Member, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	m := &Member{Gens: map[int32]bool{}}
	byID := map[string]*Attempt{}
	committing := map[string]bool{}
	lines := bytes.Split(data, []byte{'\n'})
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		var e Line
		if err := json.Unmarshal(line, &e); err != nil {
			if i == len(lines)-1 { // no newline after it: cut by a kill
				break
			}
			return nil, fmt.Errorf("eos: history line %d: %w", i+1, err)
		}
		switch e.Ev {
		case "start":
			m.Name, m.Stage, m.Client = e.Member, e.Stage, e.Client
		case "assigned":
			m.Assignments++
			if e.Gen >= 0 {
				m.Gens[e.Gen] = true
			}
		case "revoked":
		case "txn":
			a := &Attempt{ID: e.ID, Member: m.Name, Stage: m.Stage, Outcome: checker.Open, In: e.In, Out: e.Out}
			byID[e.ID] = a
			m.Attempts = append(m.Attempts, a)
		case "commit":
			committing[e.ID] = true
		case "end":
			a := byID[e.ID]
			if a == nil {
				return nil, fmt.Errorf("eos: history line %d: end of unknown txn %s", i+1, e.ID)
			}
			o, err := checker.ParseOutcome(e.Outcome)
			if err != nil {
				return nil, fmt.Errorf("eos: history line %d: %w", i+1, err)
			}
			a.Outcome, a.Err = o, e.Err
		case "stop":
			m.Stopped = true
		default:
			return nil, fmt.Errorf("eos: history line %d: unknown event %q", i+1, e.Ev)
		}
	}
	// A transaction whose commit was asked for but never answered (the
	// process died) may have committed; one never asked to commit stays
	// Open: it can never become visible.
	for _, a := range m.Attempts {
		if a.Outcome == checker.Open && committing[a.ID] {
			a.Outcome = checker.Unknown
		}
	}
	return m, nil
}

// ReadHistory reads every hist-*.jsonl file in dir.
func ReadHistory(dir string) (*History, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "hist-*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	h := &History{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		m, err := ParseMember(bufio.NewReader(f))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if m.Name == "" {
			m.Name = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "hist-"), ".jsonl")
		}
		h.Members = append(h.Members, m)
	}
	return h, nil
}

// HistoryPath is where a member's history goes.
func HistoryPath(dir, member string) string {
	return filepath.Join(dir, "hist-"+member+".jsonl")
}
