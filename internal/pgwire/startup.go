package pgwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Startup-phase packet codes (the first int32 of a length-prefixed packet
// that has no type byte). These are fixed by the protocol.
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
	cancelRequestCode = 80877102
	protocol30        = 3 << 16
)

// maxStartupPacketLen is PostgreSQL's MAX_STARTUP_PACKET_LENGTH: anything
// longer in the startup phase is hostile or garbage.
const maxStartupPacketLen = 10000

// packetKind classifies a startup-phase packet.
type packetKind int

const (
	packetStartup packetKind = iota
	packetSSLRequest
	packetGSSEncRequest
	packetCancel
)

// startupPacket is a decoded startup-phase packet.
type startupPacket struct {
	kind packetKind
	// version is the requested protocol (major<<16 | minor) of a
	// StartupMessage.
	version uint32
	// params holds a StartupMessage's name/value pairs, in order.
	params [][2]string
	// pid and secret identify the backend a CancelRequest targets.
	pid    uint32
	secret []byte
}

var errBadStartup = errors.New("pgwire: invalid startup packet")

// readStartupPacket reads one length-prefixed startup-phase packet from r,
// reading exactly its bytes and no more: after an SSLRequest the next bytes
// belong to the TLS handshake, and bytes a client sent before the server's
// answer must not be taken as part of the encrypted session.
func readStartupPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 8 || n > maxStartupPacketLen {
		return nil, fmt.Errorf("%w: length %d", errBadStartup, n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("pgwire: reading startup packet: %w", err)
	}
	return body, nil
}

// decodeStartupPacket decodes the body of a startup-phase packet (after
// its length). A StartupMessage of any protocol version decodes; the caller
// decides which versions it speaks.
func decodeStartupPacket(body []byte) (startupPacket, error) {
	if len(body) < 4 {
		return startupPacket{}, fmt.Errorf("%w: too short", errBadStartup)
	}
	code := binary.BigEndian.Uint32(body)
	rest := body[4:]
	switch code {
	case sslRequestCode:
		if len(rest) != 0 {
			return startupPacket{}, fmt.Errorf("%w: SSLRequest with payload", errBadStartup)
		}
		return startupPacket{kind: packetSSLRequest}, nil
	case gssEncRequestCode:
		if len(rest) != 0 {
			return startupPacket{}, fmt.Errorf("%w: GSSENCRequest with payload", errBadStartup)
		}
		return startupPacket{kind: packetGSSEncRequest}, nil
	case cancelRequestCode:
		// Protocol 3.0 keys are 4 bytes; 3.2 allows up to 256.
		if len(rest) < 8 || len(rest) > 4+256 {
			return startupPacket{}, fmt.Errorf("%w: CancelRequest length %d", errBadStartup, len(body))
		}
		return startupPacket{
			kind:   packetCancel,
			pid:    binary.BigEndian.Uint32(rest),
			secret: bytes.Clone(rest[4:]),
		}, nil
	}
	p := startupPacket{kind: packetStartup, version: code}
	if code>>16 != 3 {
		// Not protocol 3: the body layout is unknown, keep no params.
		return p, nil
	}
	// name\0value\0 ... \0
	for {
		if len(rest) == 0 {
			return startupPacket{}, fmt.Errorf("%w: missing terminator", errBadStartup)
		}
		if rest[0] == 0 {
			if len(rest) != 1 {
				return startupPacket{}, fmt.Errorf("%w: trailing bytes after terminator", errBadStartup)
			}
			return p, nil
		}
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return startupPacket{}, fmt.Errorf("%w: unterminated parameter name", errBadStartup)
		}
		name := string(rest[:i])
		rest = rest[i+1:]
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return startupPacket{}, fmt.Errorf("%w: parameter %q has no value", errBadStartup, name)
		}
		p.params = append(p.params, [2]string{name, string(rest[:j])})
		rest = rest[j+1:]
	}
}
