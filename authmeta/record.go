package authmeta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txncoord/txncoord/internal/recordio"
	"github.com/txncoord/txncoord/storage"
	"github.com/txncoord/txncoord/wire"
)

// The bbolt layout, inside the space:
//
//	acls/  encoded binding → empty
//	scram/ mechanism byte + user name → encoded credential
//	quotas/ entity key (quotaEntityKey) → entity and values
var (
	bucketACLs  = []byte("acls")
	bucketSCRAM = []byte("scram")
)

// Record, version 1 (n is a uvarint, strings are n + bytes):
//
//	u8 version (1), u8 op
//	op 1 (ACL added), 2 (ACL removed): the binding: u8 resource type,
//	  name, u8 pattern type, principal, host, u8 operation, u8 permission
//	op 3 (SCRAM set): u8 mechanism, user, n + salt, u32 iterations,
//	  n + stored key, n + server key
//	op 4 (SCRAM deleted): u8 mechanism, user
//	op 5 (client quota set), 6 (client quota removed): quotas.go
//	op 7 (feature level finalized): features.go
const recordVersion = 1

const (
	opACLAdd byte = iota + 1
	opACLRemove
	opSCRAMSet
	opSCRAMDelete
)

var errBadRecord = errors.New("authmeta: corrupt record")

func encodeBinding(b Binding) []byte {
	out := []byte{byte(b.ResourceType)}
	out = appendString(out, b.Name)
	out = append(out, byte(b.Pattern))
	out = appendString(out, b.Principal)
	out = appendString(out, b.Host)
	return append(out, byte(b.Operation), byte(b.Permission))
}

func readBinding(r *recordio.Reader) Binding {
	var b Binding
	if v := r.Take(1); v != nil {
		b.ResourceType = kmsg.ACLResourceType(v[0])
	}
	b.Name = r.String()
	if v := r.Take(1); v != nil {
		b.Pattern = kmsg.ACLResourcePatternType(v[0])
	}
	b.Principal = r.String()
	b.Host = r.String()
	if v := r.Take(2); v != nil {
		b.Operation, b.Permission = kmsg.ACLOperation(v[0]), kmsg.ACLPermissionType(v[1])
	}
	return b
}

func aclRecord(op byte, b Binding) []byte {
	return append([]byte{recordVersion, op}, encodeBinding(b)...)
}

// scramKey names one user's credential for one mechanism.
type scramKey struct {
	Mechanism byte // mechSHA256 or mechSHA512
	User      string
}

func (k scramKey) encode() []byte { return append([]byte{k.Mechanism}, k.User...) }

func encodeCred(c wire.ScramCredentials) []byte {
	var out []byte
	out = appendBytes(out, c.Salt)
	out = binary.BigEndian.AppendUint32(out, uint32(c.Iterations))
	out = appendBytes(out, c.StoredKey)
	return appendBytes(out, c.ServerKey)
}

func readCred(r *recordio.Reader) wire.ScramCredentials {
	var c wire.ScramCredentials
	c.Salt = append([]byte(nil), r.Bytes()...)
	c.Iterations = int(r.Uint32())
	c.StoredKey = append([]byte(nil), r.Bytes()...)
	c.ServerKey = append([]byte(nil), r.Bytes()...)
	return c
}

func scramSetRecord(k scramKey, c wire.ScramCredentials) []byte {
	out := []byte{recordVersion, opSCRAMSet, k.Mechanism}
	out = appendString(out, k.User)
	return append(out, encodeCred(c)...)
}

func scramDeleteRecord(k scramKey) []byte {
	return appendString([]byte{recordVersion, opSCRAMDelete, k.Mechanism}, k.User)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// ApplyRecord is the storage codec of KindAuthMeta.
func ApplyRecord(root storage.Root, raw []byte) error {
	r := recordio.NewReader(raw, errBadRecord)
	head := r.Take(2)
	if head == nil || head[0] != recordVersion {
		return fmt.Errorf("%w: unknown version", errBadRecord)
	}
	switch head[1] {
	case opACLAdd, opACLRemove:
		key := raw[2:]
		readBinding(r)
		if r.Err() != nil || r.Len() != 0 {
			return errBadRecord
		}
		b, err := root.CreateBucketIfNotExists(bucketACLs)
		if err != nil {
			return err
		}
		if head[1] == opACLAdd {
			return b.Put(key, []byte{})
		}
		return b.Delete(key)
	case opSCRAMSet, opSCRAMDelete:
		var k scramKey
		if v := r.Take(1); v != nil {
			k.Mechanism = v[0]
		}
		k.User = r.String()
		var cred []byte
		if head[1] == opSCRAMSet {
			cred = raw[len(raw)-r.Len():]
			readCred(r)
		}
		if r.Err() != nil || r.Len() != 0 || k.User == "" {
			return errBadRecord
		}
		b, err := root.CreateBucketIfNotExists(bucketSCRAM)
		if err != nil {
			return err
		}
		if head[1] == opSCRAMSet {
			return b.Put(k.encode(), cred)
		}
		return b.Delete(k.encode())
	case opFeatureSet:
		return applyFeature(root, raw)
	case opQuotaSet, opQuotaDelete:
		body := raw[2:]
		entity := readQuotaEntity(r)
		if head[1] == opQuotaSet {
			readQuotaValues(r)
		}
		if r.Err() != nil || r.Len() != 0 || validQuotaEntity(entity) != "" {
			return errBadRecord
		}
		b, err := root.CreateBucketIfNotExists(bucketQuotas)
		if err != nil {
			return err
		}
		key := []byte(quotaEntityKey(entity))
		if head[1] == opQuotaSet {
			return b.Put(key, body)
		}
		return b.Delete(key)
	}
	return fmt.Errorf("%w: unknown op %d", errBadRecord, head[1])
}
