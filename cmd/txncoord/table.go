package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Table output: aligned columns, written as rows arrive.
//
// Column widths come from the header and the first tableWindow rows; later
// rows are written at once with those widths (a longer cell pushes the rest
// of its own row to the right instead of re-padding the table). A cell is
// cut to maxCellWidth runes with "…" in the middle, so both ends of a long
// transactional id stay readable; with --wide (wide) cells are written
// whole, and a cell wider than maxWideColumn does not widen its column
// (it overflows in its own row), so one huge value does not pad every
// other row. Control characters are escaped
// (\n, \t, \x00), so a row is always one line.
const (
	tableWindow   = 1000
	maxCellWidth  = 64
	maxWideColumn = 200
	columnGap     = "  "
)

type table struct {
	w       *bufio.Writer
	wide    bool
	pending [][]string // header and rows until the widths are known
	widths  []int      // nil until the window is written
	err     error
}

// newTable starts a table on w with the given column names.
func newTable(w io.Writer, wide bool, header ...string) *table {
	t := &table{w: bufio.NewWriter(w), wide: wide}
	t.pending = append(t.pending, header)
	return t
}

// Row adds one row, writing it now once the widths are known.
func (t *table) Row(cells ...string) {
	for i, c := range cells {
		cells[i] = t.cell(c)
	}
	if t.widths != nil {
		t.write(cells)
		return
	}
	t.pending = append(t.pending, cells)
	if len(t.pending) > tableWindow { // the header and tableWindow rows
		t.settle()
	}
}

// Flush writes what is still held and returns the first write error.
func (t *table) Flush() error {
	if t.widths == nil {
		t.settle()
	}
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// settle fixes the widths from the rows held and writes them.
func (t *table) settle() {
	limit := maxCellWidth
	if t.wide {
		limit = maxWideColumn
	}
	for _, row := range t.pending {
		for i, c := range row {
			for len(t.widths) <= i {
				t.widths = append(t.widths, 0)
			}
			if w := utf8.RuneCountInString(c); w <= limit {
				t.widths[i] = max(t.widths[i], w)
			}
		}
	}
	if t.widths == nil {
		t.widths = []int{}
	}
	for _, row := range t.pending {
		t.write(row)
	}
	t.pending = nil
}

func (t *table) write(row []string) {
	if t.err != nil {
		return
	}
	for i, c := range row {
		t.w.WriteString(c)
		if i == len(row)-1 {
			break // no trailing blanks
		}
		width := 0
		if i < len(t.widths) {
			width = t.widths[i]
		}
		if pad := width - utf8.RuneCountInString(c); pad > 0 {
			t.w.WriteString(strings.Repeat(" ", pad))
		}
		t.w.WriteString(columnGap)
	}
	if _, err := t.w.WriteString("\n"); err != nil {
		t.err = err
	}
}

// cell makes a value printable on one line and, unless wide, at most
// maxCellWidth runes. It reads only the runes it keeps, so a 30,000-byte
// value costs no more than a short one.
func (t *table) cell(s string) string {
	if t.wide {
		return escapeControls(s)
	}
	if head, tail, cut := ends(s, maxCellWidth); cut {
		s = escapeControls(head) + "…" + escapeControls(tail)
	} else {
		s = escapeControls(s)
	}
	if utf8.RuneCountInString(s) > maxCellWidth { // escapes made it longer
		head, tail, _ := ends(s, maxCellWidth)
		s = head + "…" + tail
	}
	return s
}

// ends returns, when s has more than n runes, its first and last runes
// totalling n-1 (two thirds head, one third tail) and cut true; otherwise s
// and cut false.
func ends(s string, n int) (head, tail string, cut bool) {
	i, runes := 0, 0
	for i < len(s) && runes <= n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		runes++
	}
	if runes <= n {
		return s, "", false
	}
	tailRunes := (n - 1) / 3
	headRunes := n - 1 - tailRunes
	h := 0
	for r := 0; r < headRunes; r++ {
		_, size := utf8.DecodeRuneInString(s[h:])
		h += size
	}
	t := len(s)
	for r := 0; r < tailRunes; r++ {
		_, size := utf8.DecodeLastRuneInString(s[:t])
		t -= size
	}
	return s[:h], s[t:], true
}

// escapeControls quotes control characters and invalid UTF-8 as Go does in
// a quoted string (\n, \t, \x00), leaving everything else as it is.
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
