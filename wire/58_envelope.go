package wire

// Envelope (key 58), v0, KIP-590: a broker forwards a client's request to
// the controller wrapped with the client's principal and address, so the
// controller authorizes the request as the client's, not as the broker's.
//
// Behavior, on a server with Config.Envelope (the controller's node):
//   - only the cluster principal may send one (CLUSTER_ACTION on the
//     cluster); anyone else gets CLUSTER_AUTHORIZATION_FAILED and the
//     inner request is not run;
//   - the inner request (RequestData: its header and body) runs through
//     this server's handler of its key, as RequestPrincipal (Kafka's
//     DefaultPrincipalData, version-prefixed) from ClientHostAddress: the
//     handler's ACL checks see the client;
//   - its answer (header and body) is ResponseData; an inner request that
//     cannot be read, names a key this node does not serve at that version,
//     or is itself an Envelope, ApiVersions or SASL exchange is
//     INVALID_REQUEST / UNSUPPORTED_VERSION with no ResponseData.
//
// The key is not advertised in ApiVersions: Kafka 4.x lists it only on the
// controller listener, which clients never see, and only brokers send it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// envelopeKey is Envelope's API key.
const envelopeKey = 58

// envelope answers one Envelope request read on c.
func (c *conn) envelope(t *ticket, h header, body []byte, req *Request) (pending, bool) {
	if h.version != 0 {
		req.Logger().Warn().Str("reason", "unsupported version").Msg("connection closed: unsupported Envelope version")
		return pending{}, false
	}
	decoded, err := decodeBody(h, body)
	if err != nil {
		req.Logger().Warn().Err(err).Str("reason", "undecodable request").Msg("connection closed: undecodable request")
		return pending{}, false
	}
	env := decoded.(*kmsg.EnvelopeRequest)
	req.Body = env
	resp := env.ResponseKind().(*kmsg.EnvelopeResponse)
	answer := func(code int16) (pending, bool) {
		resp.ErrorCode = code
		return pending{h: h, reply: Now(resp)}, true
	}
	if !ClusterAction(req) {
		req.Logger().Warn().Str("principal", req.Principal).Str("reason", "cluster authorization failed").Msg("broker-only request denied")
		return answer(kerr.ClusterAuthorizationFailed.Code)
	}
	ih, ibody, err := parseHeader(env.RequestData)
	if err != nil {
		return answer(kerr.InvalidRequest.Code)
	}
	switch ih.key {
	case envelopeKey, 18, 17, 36:
		return answer(kerr.InvalidRequest.Code)
	}
	rng, known := c.s.advertised[ih.key]
	if !known || ih.version < rng[0] || ih.version > rng[1] {
		return answer(kerr.UnsupportedVersion.Code)
	}
	inner, err := decodeBody(ih, ibody)
	if err != nil {
		return answer(kerr.InvalidRequest.Code)
	}
	principal, err := DecodePrincipal(env.RequestPrincipal)
	if err != nil {
		return answer(kerr.PrincipalDeserializationFailure.Code)
	}
	remote := c.nc.RemoteAddr()
	if ip := net.IP(env.ClientHostAddress); len(ip) == net.IPv4len || len(ip) == net.IPv6len {
		remote = &net.TCPAddr{IP: ip}
	}
	ir := &Request{
		Key: ih.key, Version: ih.version, CorrelationID: ih.correlationID, ClientID: ih.clientID, Remote: remote,
		ConnID: c.id, Principal: principal, Stopping: c.s.draining, Log: c.s.cfg.Log, sec: c.s.sec,
		refusalLogged: &c.refusalLogged, Body: inner,
	}
	reply, err := c.s.callHandler(t, ir)
	if err != nil {
		ir.Logger().Error().Err(err).Str("reason", "handler failed").Msg("connection closed: handler failed")
		return pending{}, false
	}
	return pending{h: h, reply: func() (kmsg.Response, error) {
		r, err := resolveReply(ih.key, ih.version, reply)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, fmt.Errorf("wire: the request in an Envelope (%s) gave no response", kmsg.NameForKey(ih.key))
		}
		frame := appendResponse(nil, ih.correlationID, r)
		resp.ResponseData = frame[4:]
		return resp, nil
	}}, true
}

// EncodePrincipal is Kafka's DefaultKafkaPrincipalBuilder.serialize of a
// principal "Type:Name": DefaultPrincipalData, prefixed with its version.
func EncodePrincipal(principal string) []byte {
	typ, name, ok := strings.Cut(principal, ":")
	if !ok {
		typ, name = "User", principal
	}
	d := kmsg.NewDefaultPrincipalData()
	d.Type, d.Name = typ, name
	return d.AppendTo(binary.BigEndian.AppendUint16(nil, uint16(d.Version)))
}

// DecodePrincipal reads what EncodePrincipal wrote, as "Type:Name".
func DecodePrincipal(b []byte) (string, error) {
	if len(b) < 2 {
		return "", errors.New("wire: principal of fewer than 2 bytes")
	}
	d := kmsg.NewDefaultPrincipalData()
	d.Version = int16(binary.BigEndian.Uint16(b))
	if d.Version != 0 {
		return "", fmt.Errorf("wire: principal data version %d", d.Version)
	}
	if err := d.ReadFrom(b[2:]); err != nil {
		return "", fmt.Errorf("wire: principal: %w", err)
	}
	return d.Type + ":" + d.Name, nil
}

// Envelop wraps req, a client's request received by this node, in an
// Envelope carrying its principal and address (KIP-590): what a node sends
// the controller instead of req. Unwrap reads the controller's answer.
func Envelop(req *Request) *kmsg.EnvelopeRequest {
	env := kmsg.NewPtrEnvelopeRequest()
	body := req.Body
	body.SetVersion(req.Version)
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(derefOr(req.ClientID, "")))
	frame := formatter.AppendRequest(nil, body, req.CorrelationID)
	env.RequestData = frame[4:]
	env.RequestPrincipal = EncodePrincipal(req.Principal)
	if a, ok := req.Remote.(*net.TCPAddr); ok {
		if ip4 := a.IP.To4(); ip4 != nil {
			env.ClientHostAddress = ip4
		} else {
			env.ClientHostAddress = a.IP
		}
	}
	return env
}

// Unwrap reads the answer to Envelop(req): the controller's answer to
// req, or the Envelope's error.
func Unwrap(req *Request, raw kmsg.Response) (kmsg.Response, error) {
	resp, ok := raw.(*kmsg.EnvelopeResponse)
	if !ok {
		return nil, fmt.Errorf("wire: %T answers an Envelope", raw)
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("wire: Envelope refused: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	inner := req.Body.ResponseKind()
	inner.SetVersion(req.Version)
	if _, err := parseResponse(resp.ResponseData, inner); err != nil {
		return nil, err
	}
	return inner, nil
}
