package netpath

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The netfilter queue protocol (linux/netfilter/nfnetlink_queue.h): the
// kernel keeps each queued packet and sends its metadata only (copy mode
// META: no payload crosses to userspace); a verdict releases it. A batch
// verdict accepts every packet whose id is at most the given one, so one
// message releases a whole run of packets whose delay has passed.
const (
	nfqnlMsgPacket       = 0
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3

	nfqaPacketHdr    = 1
	nfqaVerdictHdr   = 2
	nfqaCfgCmd       = 1
	nfqaCfgParams    = 2
	nfqaCfgQueueMax  = 3
	nfqnlCfgCmdBind  = 1
	nfqnlCopyMeta    = 1
	nfAccept         = 1
	nlaHeaderLen     = 4
	nfgenHeaderLen   = 4
	queueMaxLen      = 1 << 16
	socketBufferSize = 8 << 20
)

// shaper holds the packets of one netfilter queue for a delay each and
// releases them in arrival order: a packet leaves at the later of its own
// due time (arrival + delay ± uniform jitter) and the previous packet's, so
// jitter never reorders a TCP stream. The delay may change while it runs
// (SetDelay); packets already held keep theirs. Its memory is bounded by
// the packets in flight (at most queueMaxLen, the kernel's queue bound).
type shaper struct {
	fd    int
	queue uint16
	// port and ruled belong to the Path (under its lock): the server's
	// port and whether the rule sending its packets here is in place.
	port  int
	ruled bool

	delay  atomic.Int64 // ns
	jitter atomic.Int64 // ns

	mu      sync.Mutex
	pending []held // FIFO
	last    time.Time
	rng     *rand.Rand

	held     atomic.Int64 // packets held in all
	lost     atomic.Int64 // netlink reads that overflowed (ENOBUFS)
	maxDepth atomic.Int64
	realtime atomic.Bool // the thread got its real-time priority
	// lateNS and lateMax sum and bound how long after its due time each
	// packet was released: the shaper's own error.
	lateNS, lateMax atomic.Int64
}

type held struct {
	id  uint32
	due time.Time
}

// newShaper binds queue on the netlink socket fd (made in the namespace
// whose rules send packets to the queue).
func newShaper(fd int, queue uint16, seed uint64) (*shaper, error) {
	s := &shaper{fd: fd, queue: queue, rng: rand.New(rand.NewPCG(seed, uint64(queue)))}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBufferSize)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	// The configuration acks below wait at most a second.
	tv := unix.NsecToTimeval(int64(time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, unix.AF_INET}
	if err := s.config(attr(nfqaCfgCmd, cmd)); err != nil {
		return nil, fmt.Errorf("bind queue %d: %w", queue, err)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0)
	params[4] = nfqnlCopyMeta
	maxLen := binary.BigEndian.AppendUint32(nil, queueMaxLen)
	if err := s.config(append(attr(nfqaCfgParams, params), attr(nfqaCfgQueueMax, maxLen)...)); err != nil {
		return nil, fmt.Errorf("configure queue %d: %w", queue, err)
	}
	return s, nil
}

// SetDelay sets the delay and jitter of packets queued from now on.
func (s *shaper) SetDelay(d, jitter time.Duration) {
	s.delay.Store(int64(d))
	s.jitter.Store(int64(jitter))
}

// config sends one configuration message and waits for its ack.
func (s *shaper) config(attrs []byte) error {
	msg := nlmsg(nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, unix.AF_UNSPEC, s.queue, attrs)
	if err := unix.Sendto(s.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(s.fd, buf, 0)
	if err != nil {
		return err
	}
	if n < unix.NLMSG_HDRLEN+4 {
		return errors.New("short netlink reply")
	}
	if binary.NativeEndian.Uint16(buf[4:6]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); code != 0 {
			return unix.Errno(-code)
		}
	}
	return nil
}

// run reads queued packets and releases them when due until ctx ends;
// then it releases every packet still held. One OS thread does both,
// locked and never returned to the runtime: it waits in ppoll for the
// next packet or the next due time (nanosecond timeout, no timer slack)
// and, where the process may (root), runs at a real-time priority, as the
// kernel's own timers would — so a due packet leaves when the scheduler
// can run anything, not after the machine's other work. The socket is
// closed by the caller after run returns.
func (s *shaper) run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		// The goroutine ends locked: its thread (real-time, no slack) is
		// destroyed rather than reused.
		runtime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		if unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0) == nil {
			s.realtime.Store(true)
		}
		errc <- s.loop(ctx)
	}()
	return <-errc
}

func (s *shaper) loop(ctx context.Context) error {
	buf := make([]byte, 1<<16)
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	for {
		stopping := ctx.Err() != nil
		// Wait for a packet, the oldest held packet's due time, or 50 ms
		// (to see ctx end).
		wait := 50 * time.Millisecond
		s.mu.Lock()
		if len(s.pending) > 0 {
			wait = min(wait, time.Until(s.pending[0].due))
		}
		s.mu.Unlock()
		if stopping {
			wait = 0
		}
		if wait > 0 {
			ts := unix.NsecToTimespec(int64(wait))
			if _, err := unix.Ppoll(fds, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("netlink poll: %w", err)
			}
		}
		if err := s.drain(buf); err != nil {
			return err
		}
		s.releaseDue(time.Now(), stopping)
		if stopping {
			s.mu.Lock()
			empty := len(s.pending) == 0
			s.mu.Unlock()
			if empty {
				return nil
			}
		}
	}
}

// drain reads the packet messages waiting on the socket, at most 64
// reads at a time so that a steady stream does not hold up releases.
func (s *shaper) drain(buf []byte) error {
	for range 64 {
		n, _, err := unix.Recvfrom(s.fd, buf, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EWOULDBLOCK):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			// A lost message's packet is released by a later batch
			// verdict (ids only grow): it leaves early, not never.
			s.lost.Add(1)
			continue
		case err != nil:
			return fmt.Errorf("netlink read: %w", err)
		}
		now := time.Now()
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:6])
			if typ == unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket && l >= unix.NLMSG_HDRLEN+nfgenHeaderLen {
				if id, ok := packetID(b[unix.NLMSG_HDRLEN+nfgenHeaderLen : l]); ok {
					s.hold(id, now)
				}
			}
			b = b[min(len(b), nlmAlign(l)):]
		}
	}
	return nil
}

func (s *shaper) hold(id uint32, now time.Time) {
	d := time.Duration(s.delay.Load())
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := time.Duration(s.jitter.Load()); j > 0 {
		d += time.Duration(s.rng.Int64N(int64(2*j)+1)) - j
	}
	due := now.Add(d)
	if due.Before(s.last) {
		due = s.last
	}
	s.last = due
	s.pending = append(s.pending, held{id, due})
	s.held.Add(1)
	if depth := int64(len(s.pending)); depth > s.maxDepth.Load() {
		s.maxDepth.Store(depth)
	}
}

// releaseDue accepts, with one batch verdict, every held packet due by
// now (all of them when all is set).
func (s *shaper) releaseDue(now time.Time, all bool) {
	s.mu.Lock()
	i := 0
	for i < len(s.pending) && (all || !s.pending[i].due.After(now)) {
		i++
	}
	var last uint32
	for _, h := range s.pending[:i] {
		if late := int64(now.Sub(h.due)); late > 0 {
			s.lateNS.Add(late)
			if late > s.lateMax.Load() {
				s.lateMax.Store(late)
			}
		}
	}
	if i > 0 {
		last = s.pending[i-1].id
		n := copy(s.pending, s.pending[i:])
		s.pending = s.pending[:n]
	}
	s.mu.Unlock()
	if i > 0 {
		s.verdict(last)
	}
}

func (s *shaper) verdict(upTo uint32) {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v[0:4], nfAccept)
	binary.BigEndian.PutUint32(v[4:8], upTo)
	msg := nlmsg(nfqnlMsgVerdictBatch, unix.NLM_F_REQUEST, unix.AF_UNSPEC, s.queue, attr(nfqaVerdictHdr, v))
	_ = unix.Sendto(s.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// packetID finds NFQA_PACKET_HDR among a packet message's attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= nlaHeaderLen {
		l := int(binary.NativeEndian.Uint16(attrs[0:2]))
		typ := binary.NativeEndian.Uint16(attrs[2:4]) & 0x3fff
		if l < nlaHeaderLen || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= nlaHeaderLen+4 {
			return binary.BigEndian.Uint32(attrs[nlaHeaderLen:]), true
		}
		if nlaAlign(l) >= len(attrs) {
			break
		}
		attrs = attrs[nlaAlign(l):]
	}
	return 0, false
}

func nlmsg(msg uint16, flags uint16, family uint8, queue uint16, attrs []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+nfgenHeaderLen, unix.NLMSG_HDRLEN+nfgenHeaderLen+len(attrs))
	binary.NativeEndian.PutUint16(b[4:6], unix.NFNL_SUBSYS_QUEUE<<8|msg)
	binary.NativeEndian.PutUint16(b[6:8], flags)
	b[unix.NLMSG_HDRLEN] = family
	b[unix.NLMSG_HDRLEN+1] = unix.NFNETLINK_V0
	binary.BigEndian.PutUint16(b[unix.NLMSG_HDRLEN+2:], queue)
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b[0:4], uint32(len(b)))
	return b
}

func attr(typ uint16, data []byte) []byte {
	l := nlaHeaderLen + len(data)
	b := make([]byte, nlaAlign(l))
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[nlaHeaderLen:], data)
	return b
}

func nlaAlign(n int) int { return (n + 3) &^ 3 }
func nlmAlign(n int) int { return (n + 3) &^ 3 }
