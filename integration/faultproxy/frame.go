package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrameBytes refuses absurd size prefixes before allocating (Kafka's
// socket.request.max.bytes default).
const maxFrameBytes = 100 << 20

var errBadFrame = errors.New("faultproxy: bad frame")

// readFrame reads one size-prefixed frame and returns it whole, prefix
// included, so it can be forwarded or replayed byte for byte.
func readFrame(r io.Reader, minBody int32) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < minBody || size > maxFrameBytes {
		return nil, fmt.Errorf("%w: size %d", errBadFrame, size)
	}
	frame := make([]byte, 4+int(size))
	copy(frame, prefix[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// requestHeader is the start of every request: api key, version,
// correlation id (8 bytes), then the client id (absent only in
// ControlledShutdown v0).
type requestHeader struct {
	key, version  int16
	correlationID int32
}

func parseRequestHeader(frame []byte) requestHeader {
	b := frame[4:]
	return requestHeader{
		key:           int16(binary.BigEndian.Uint16(b[0:])),
		version:       int16(binary.BigEndian.Uint16(b[2:])),
		correlationID: int32(binary.BigEndian.Uint32(b[4:])),
	}
}

// decodeRequest decodes the client id and body of a request frame. Header
// v2 (flexible requests) adds a tagged-field section after the client id.
func decodeRequest(frame []byte, h requestHeader) (clientID *string, req kmsg.Request, err error) {
	b := frame[12:]
	if h.key == 7 && h.version == 0 {
		return nil, nil, fmt.Errorf("%w: ControlledShutdown v0 is not decoded", errBadFrame)
	}
	req = kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, nil, fmt.Errorf("%w: unknown api key %d", errBadFrame, h.key)
	}
	if h.version < 0 || h.version > req.MaxVersion() {
		return nil, nil, fmt.Errorf("%w: %s v%d is unknown to kmsg", errBadFrame, kmsg.NameForKey(h.key), h.version)
	}
	req.SetVersion(h.version)
	r := kbin.Reader{Src: b}
	clientID = r.NullableString()
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return clientID, nil, fmt.Errorf("%w: header: %v", errBadFrame, err)
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return clientID, nil, fmt.Errorf("%w: body: %v", errBadFrame, err)
	}
	return clientID, req, nil
}

// responseCorrelationID is the first field of every response.
func responseCorrelationID(frame []byte) int32 {
	return int32(binary.BigEndian.Uint32(frame[4:]))
}

// decodeResponse decodes a response frame of a request sent at key/version.
// Flexible responses have header v1 (tagged fields), except ApiVersions,
// whose response header is always v0.
func decodeResponse(frame []byte, key, version int16) (kmsg.Response, error) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", errBadFrame, key)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	body := frame[8:]
	if key == 18 && len(body) >= 2 && binary.BigEndian.Uint16(body) == 35 {
		// KIP-511: an UNSUPPORTED_VERSION answer is always v0.
		resp.SetVersion(0)
	}
	if resp.IsFlexible() && key != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return nil, fmt.Errorf("%w: response header: %v", errBadFrame, err)
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: response body: %v", errBadFrame, err)
	}
	return resp, nil
}
