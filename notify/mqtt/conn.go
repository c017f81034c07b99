package mqtt

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

// MaxPacket is the largest MQTT packet the subscriber takes from the
// broker: a payload of MaxPayload with its topic and headers fits many
// times over. A larger one is refused by its header, before paho
// allocates room for it, and the connection is dropped (and made again).
// Set the broker's message_size_limit (mosquitto) to keep such messages
// off the topic.
const MaxPacket = 64 << 10

// ErrPacketTooLarge: the broker sent a packet over MaxPacket.
var ErrPacketTooLarge = errors.New("MQTT packet too large")

// openConn opens the connection paho would (TCP, TLS or WebSocket, with
// the proxy of the environment), reading through a packetCap.
func openConn(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: o.ConnectTimeout}
	var conn net.Conn
	var err error
	switch uri.Scheme {
	case "ws", "wss":
		u := *uri
		u.User = nil
		var tc *tls.Config
		if uri.Scheme == "wss" {
			tc = o.TLSConfig
		}
		conn, err = paho.NewWebsocket(u.String(), tc, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
	case "mqtt", "tcp":
		conn, err = proxy.FromEnvironmentUsing(dialer).Dial("tcp", uri.Host)
	case "ssl", "tls", "mqtts":
		if os.Getenv("all_proxy") == "" {
			conn, err = tls.DialWithDialer(dialer, "tcp", uri.Host, o.TLSConfig)
			break
		}
		raw, derr := proxy.FromEnvironment().Dial("tcp", uri.Host)
		if derr != nil {
			return nil, derr
		}
		tc := tls.Client(raw, o.TLSConfig)
		if err = tc.Handshake(); err != nil {
			_ = raw.Close()
			return nil, err
		}
		conn = tc
	default:
		return nil, fmt.Errorf("unknown MQTT scheme %q", uri.Scheme)
	}
	if err != nil {
		return nil, err
	}
	return &packetCap{Conn: conn, max: MaxPacket}, nil
}

// packetCap follows the MQTT fixed headers of what it reads (a type byte,
// then the remaining length in one to four bytes of seven bits) and fails
// the read that would bring a packet over max.
type packetCap struct {
	net.Conn
	max   int
	state int // inHeader, inLength or inBody
	shift uint
	size  int // the remaining length read so far
	left  int // bytes of the body still to come
}

const (
	inHeader = iota
	inLength
	inBody
)

func (c *packetCap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if cerr := c.follow(p[:n]); cerr != nil {
		_ = c.Conn.Close()
		return 0, cerr
	}
	return n, err
}

func (c *packetCap) follow(b []byte) error {
	for len(b) > 0 {
		switch c.state {
		case inHeader:
			c.state, c.shift, c.size = inLength, 0, 0
			b = b[1:]
		case inLength:
			c.size |= int(b[0]&0x7f) << c.shift
			c.shift += 7
			more := b[0]&0x80 != 0
			b = b[1:]
			if c.size > c.max || (more && c.shift >= 28) {
				return fmt.Errorf("%w: the broker sent a packet of %d bytes or more, over %d; set the broker's message_size_limit, and publish only tend notify's small messages on the topic",
					ErrPacketTooLarge, c.size, c.max)
			}
			if !more {
				c.state, c.left = inBody, c.size
				if c.left == 0 {
					c.state = inHeader
				}
			}
		case inBody:
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			if c.left == 0 {
				c.state = inHeader
			}
		}
	}
	return nil
}
