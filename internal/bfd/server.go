package bfd

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"pier.dev/pier/internal/netnsdo"
)

// Port is the UDP port single-hop control packets go to (RFC 5881).
const Port = 3784

// Source ports of the packets this side sends (RFC 5881 section 4).
const (
	srcPortMin = 49152
	srcPortMax = 65535
)

// Defaults: three packets of 100 ms, a neighbour that stops answering is
// seen 300 ms after its last packet.
const (
	DefaultInterval   = 100 * time.Millisecond
	DefaultMultiplier = 3
)

// The intervals a session accepts: below 10 ms a busy host's scheduling
// alone would take sessions down.
const (
	MinInterval = 10 * time.Millisecond
	MaxInterval = time.Minute
)

// Config configures a Server.
type Config struct {
	// Netns, when set, is the network namespace the sockets are opened
	// in (they stay there; the goroutines need not).
	Netns string
	// Port is where packets are received and sent to; 0: Port (3784).
	// Only tests on one host change it.
	Port   int
	Logger *slog.Logger
}

// SessionConfig configures one session.
type SessionConfig struct {
	// Interval is the transmit and receive interval once Up (0:
	// DefaultInterval); Multiplier how many the neighbour may miss (0:
	// DefaultMultiplier).
	Interval   time.Duration
	Multiplier int
	// OnChange is called, on the session's goroutine, after each change
	// of state; it must not block long.
	OnChange func(Change)
}

// Change is a session's change of state.
type Change struct {
	Peer     netip.Addr
	From, To State
	Diag     Diag
	// RemoteState is the state the neighbour last said (admin-down: it
	// stopped on purpose, no failure).
	RemoteState State
	// SinceLastPacket is how long before the change the neighbour's last
	// packet came (0: none ever came).
	SinceLastPacket time.Duration
}

// Server owns the receiving sockets of one namespace (UDP 3784, IPv4 and
// IPv6 as needed) and the sessions, one per neighbour address.
type Server struct {
	cfg    Config
	logger *slog.Logger
	mu     sync.Mutex
	conn4  *ipv4.PacketConn
	conn6  *ipv6.PacketConn
	byPeer map[netip.Addr]*Session
	closed bool
	wg     sync.WaitGroup
}

// Listen opens the receiving sockets.
func Listen(cfg Config) (*Server, error) {
	if cfg.Port == 0 {
		cfg.Port = Port
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, byPeer: map[netip.Addr]*Session{}}
	err := netnsdo.Do(cfg.Netns, func() error {
		c4, err := net.ListenPacket("udp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(cfg.Port)))
		if err != nil {
			return err
		}
		s.conn4 = ipv4.NewPacketConn(c4)
		if err := s.conn4.SetControlMessage(ipv4.FlagTTL, true); err != nil {
			c4.Close()
			return err
		}
		// IPv6 is optional: a namespace may have it switched off.
		if c6, err := net.ListenPacket("udp6", net.JoinHostPort("::", strconv.Itoa(cfg.Port))); err == nil {
			s.conn6 = ipv6.NewPacketConn(c6)
			if err := s.conn6.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
				c6.Close()
				s.conn6 = nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("BFD: listen on UDP %d: %w", cfg.Port, err)
	}
	s.wg.Add(1)
	go s.read4()
	if s.conn6 != nil {
		s.wg.Add(1)
		go s.read6()
	}
	return s, nil
}

func (s *Server) read4() {
	defer s.wg.Done()
	buf := make([]byte, 512)
	for {
		n, cm, from, err := s.conn4.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isClosed() {
				return
			}
			continue
		}
		ttl := -1
		if cm != nil {
			ttl = cm.TTL
		}
		s.deliver(buf[:n], from, ttl)
	}
}

func (s *Server) read6() {
	defer s.wg.Done()
	buf := make([]byte, 512)
	for {
		n, cm, from, err := s.conn6.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isClosed() {
				return
			}
			continue
		}
		hops := -1
		if cm != nil {
			hops = cm.HopLimit
		}
		s.deliver(buf[:n], from, hops)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// deliver hands a datagram to its session: single hop, so the session is
// the one of its source address, and it must come with a TTL of 255 (a
// router on the way would have lowered it).
func (s *Server) deliver(b []byte, from net.Addr, ttl int) {
	ua, ok := from.(*net.UDPAddr)
	if !ok {
		return
	}
	addr, _ := netip.AddrFromSlice(ua.IP)
	addr = addr.Unmap()
	s.mu.Lock()
	sess := s.byPeer[addr]
	s.mu.Unlock()
	if sess == nil {
		return // no session with that neighbour: dropped without a word
	}
	if ttl != 255 {
		sess.drop("TTL is not 255 (not from a neighbour one hop away)", ttl)
		return
	}
	p, err := Parse(b)
	if err != nil {
		sess.drop(err.Error(), ttl)
		return
	}
	sess.receive(p)
}

// Add starts a session with peer: it sends at once and keeps sending, the
// slow second until Up.
func (s *Server) Add(peer netip.Addr, cfg SessionConfig) (*Session, error) {
	peer = peer.Unmap()
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Multiplier == 0 {
		cfg.Multiplier = DefaultMultiplier
	}
	if cfg.Interval < MinInterval || cfg.Interval > MaxInterval {
		return nil, fmt.Errorf("BFD %s: interval %s: %s to %s", peer, cfg.Interval, MinInterval, MaxInterval)
	}
	if cfg.Multiplier < 1 || cfg.Multiplier > 255 {
		return nil, fmt.Errorf("BFD %s: multiplier %d: 1 to 255", peer, cfg.Multiplier)
	}
	if peer.Is6() && s.conn6 == nil {
		return nil, fmt.Errorf("BFD %s: no IPv6 socket in this namespace", peer)
	}
	conn, err := s.dial(peer)
	if err != nil {
		return nil, err
	}
	sess := &Session{srv: s, peer: peer, cfg: cfg, conn: conn, kick: make(chan struct{}, 1), done: make(chan struct{}),
		stopped: make(chan struct{}),
		rand:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	sess.m = newMachine(sess.discriminator(), cfg.Interval, uint8(cfg.Multiplier))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return nil, errors.New("BFD: server closed")
	}
	if s.byPeer[peer] != nil {
		s.mu.Unlock()
		conn.Close()
		return nil, fmt.Errorf("BFD %s: a session with that neighbour exists", peer)
	}
	s.byPeer[peer] = sess
	s.mu.Unlock()
	s.wg.Add(1)
	go sess.run()
	return sess, nil
}

// dial opens the sending socket: a source port of the dynamic range,
// TTL (hop limit) 255, connected to the neighbour so the kernel picks the
// source address as it does for the BGP session.
func (s *Server) dial(peer netip.Addr) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := netnsdo.Do(s.cfg.Netns, func() error {
		network := "udp4"
		if peer.Is6() {
			network = "udp6"
		}
		raddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(peer, uint16(s.cfg.Port)))
		var err error
		start := srcPortMin + rand.IntN(srcPortMax-srcPortMin+1)
		for i := range srcPortMax - srcPortMin + 1 {
			port := srcPortMin + (start-srcPortMin+i)%(srcPortMax-srcPortMin+1)
			conn, err = net.DialUDP(network, &net.UDPAddr{Port: port}, raddr)
			if err == nil {
				break
			}
			if !errors.Is(err, errAddrInUse) {
				return err
			}
		}
		if err != nil {
			return err
		}
		if peer.Is6() {
			err = ipv6.NewConn(conn).SetHopLimit(255)
		} else {
			err = ipv4.NewConn(conn).SetTTL(255)
		}
		if err != nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("BFD %s: socket: %w", peer, err)
	}
	return conn, nil
}

func (s *Server) remove(sess *Session) {
	s.mu.Lock()
	if s.byPeer[sess.peer] == sess {
		delete(s.byPeer, sess.peer)
	}
	s.mu.Unlock()
}

// Close ends every session with admin-down and closes the sockets.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*Session, 0, len(s.byPeer))
	for _, sess := range s.byPeer {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		sess.Close()
	}
	_ = s.conn4.Close()
	if s.conn6 != nil {
		_ = s.conn6.Close()
	}
	s.wg.Wait()
}
