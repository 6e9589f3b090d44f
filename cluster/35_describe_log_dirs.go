package cluster

// DescribeLogDirs (key 35), v0–v5, on a node that leads no partitions (the
// coordinator node): it keeps no partition logs, so it answers with no log
// dirs, and no error (v3+). A leader answers with its own (leaderstub).
// kadm's DescribeAllLogDirs asks every broker Metadata lists, and fails
// as a whole if one does not answer.

import (
	"context"

	"github.com/txncoord/txncoord/wire"
)

const (
	describeLogDirsMinVersion = 0
	describeLogDirsMaxVersion = 5
)

// RegisterNoLogDirs adds DescribeLogDirs answered with no log dirs, unless
// reg already has a handler for it.
func RegisterNoLogDirs(reg *wire.Registry) {
	if _, _, ok := reg.Range(35); ok {
		return
	}
	reg.Register(35, describeLogDirsMinVersion, describeLogDirsMaxVersion, func(_ context.Context, r *wire.Request) wire.Reply {
		return wire.Now(r.Body.ResponseKind())
	})
}
