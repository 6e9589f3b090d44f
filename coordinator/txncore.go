package coordinator

import (
	"github.com/txncoord/txncoord/txncore"
)

// The core's types as the coordinator's handlers name them.
type (
	// Metadata is a transactional id's stored state.
	Metadata = txncore.Metadata
	// Outcome is what one core step decided.
	Outcome = txncore.Outcome
	// PIDSource hands out a new, never used producer id.
	PIDSource = txncore.PIDSource
)

func fail(code int16) Outcome { return txncore.Fail(code) }

func isPrepare(s txncore.State) bool { return s == txncore.PrepareCommit || s == txncore.PrepareAbort }
