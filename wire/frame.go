package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes default (100 MiB).
const DefaultMaxFrameBytes = 100 << 20

// minRequestFrame is the smallest valid request frame: api key, api version
// and correlation id.
const minRequestFrame = 8

var (
	errFrameTooLarge = errors.New("frame larger than the limit")
	errFrameTooSmall = errors.New("frame too small for a request header")
	errMalformed     = errors.New("malformed request")
)

// header is a decoded request header (v0–v2).
type header struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// checkFrameSize validates a frame's length prefix before anything of that
// size is allocated.
func checkFrameSize(size int32, limit int32) error {
	switch {
	case size < minRequestFrame:
		return fmt.Errorf("%w: %d bytes", errFrameTooSmall, size)
	case size > limit:
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, size, limit)
	}
	return nil
}

// parseHeader reads the request header from a frame (without the length
// prefix) and returns the body that follows it. Whether the header carries
// tagged fields (header v2) depends on whether the request is flexible at
// that version; for a version kmsg does not know, the flexibility of its
// newest version is used, as Kafka does for the KIP-511 ApiVersions answer.
func parseHeader(frame []byte) (header, []byte, error) {
	return parseHeaderReusing(frame, nil)
}

// parseHeaderReusing is parseHeader that answers prev, the client id of the
// connection's previous request, when the frame's is the same: a client
// sends one id for the life of a connection, and a new string per request
// is an allocation per request. The header costs no other allocation: the
// flexibility comes from a table (headerFlexibleFrom), the tags are
// skipped in place.
func parseHeaderReusing(frame []byte, prev *string) (header, []byte, error) {
	if len(frame) < minRequestFrame {
		return header{}, nil, fmt.Errorf("%w: %d bytes", errFrameTooSmall, len(frame))
	}
	h := header{
		key:           int16(binary.BigEndian.Uint16(frame[0:])),
		version:       int16(binary.BigEndian.Uint16(frame[2:])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	if h.key == 7 && h.version == 0 {
		// ControlledShutdown v0 is the one request with header v0 (no
		// client id).
		return h, frame[8:], nil
	}
	r := kbin.Reader{Src: frame[8:]}
	if n := r.Int16(); n >= 0 {
		id := r.Span(int(n))
		if prev != nil && *prev == string(id) {
			h.clientID = prev
		} else if r.Ok() {
			s := string(id)
			h.clientID = &s
		}
	}
	if headerFlexible(h.key, h.version) {
		// kmsg.SkipTags, without its interface argument, through which
		// the reader would escape to the heap.
		for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	if err := r.Complete(); err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", errMalformed, err)
	}
	return h, r.Src, nil
}

// headerFlexible reports whether a request of key at version has tagged
// fields in its header (header v2): it is flexible at that version, or,
// for a version kmsg does not know, at its newest.
func headerFlexible(key, version int16) bool {
	flexibleOnce.Do(loadFlexible)
	if key < 0 || int(key) >= len(flexibleFrom) || flexibleFrom[key].max < 0 {
		return false
	}
	f := flexibleFrom[key]
	if version > f.max || version < 0 {
		version = f.max
	}
	return f.from >= 0 && version >= f.from
}

// flexibleFrom holds, per API key kmsg knows, its newest version (max; -1:
// unknown key) and the first flexible one (from; -1: none): the answer of
// kmsg.RequestForKey(key).IsFlexible() without a request allocated per
// frame. A request once flexible is flexible at every later version.
var (
	flexibleOnce sync.Once
	flexibleFrom [256]struct{ max, from int16 }
)

func loadFlexible() {
	for k := range flexibleFrom {
		flexibleFrom[k].max, flexibleFrom[k].from = -1, -1
		req := kmsg.RequestForKey(int16(k))
		if req == nil {
			continue
		}
		flexibleFrom[k].max = req.MaxVersion()
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				flexibleFrom[k].from = v
				break
			}
		}
	}
}

// decodeBody decodes a request body at the header's version.
func decodeBody(h header, body []byte) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", errMalformed, h.key)
	}
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: body: %v", errMalformed, err)
	}
	return req, nil
}

// appendResponse appends a length-prefixed response frame. Flexible responses
// use response header v1 (a tagged-field section after the correlation id),
// except ApiVersions, whose response header is always v0 so that a client can
// read it before it knows what the server supports.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// parseResponse decodes a response frame (without the length prefix) into
// resp, whose version must already be set.
func parseResponse(frame []byte, resp kmsg.Response) (correlationID int32, err error) {
	if len(frame) < 4 {
		return 0, fmt.Errorf("%w: response of %d bytes", errMalformed, len(frame))
	}
	correlationID = int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return correlationID, fmt.Errorf("%w: response header: %v", errMalformed, err)
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return correlationID, fmt.Errorf("%w: response body: %v", errMalformed, err)
	}
	return correlationID, nil
}
