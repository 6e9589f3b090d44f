// Package recordio reads the binary records that components append to
// their storage spaces and write to bbolt (topics, leaderstub): lengths
// and counts as uvarints, fixed-size integers big-endian. A Reader's
// first failure sticks, so a decoder reads every field and checks Err
// once; the error is the caller's own "corrupt record" sentinel, so each
// package keeps the error its callers and tests know.
package recordio
